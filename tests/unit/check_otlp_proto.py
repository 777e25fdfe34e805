#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Compare proto/otlp/ with the definitions the PyPI package opentelemetry-proto ships.

Compiles DIR's .proto files with grpc_tools' protoc and checks that every message, enum and
service of each file exists in the official module with the same fields (name, number, label,
type, message type, oneof) and nothing more or less. Exit 1 on any difference.
Usage: check_otlp_proto.py DIR (run with the python of scripts/test-venv)
"""
import importlib
import os
import sys
import tempfile

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

FILES = {
    "opentelemetry/proto/common/v1/common.proto": "opentelemetry.proto.common.v1.common_pb2",
    "opentelemetry/proto/resource/v1/resource.proto":
        "opentelemetry.proto.resource.v1.resource_pb2",
    "opentelemetry/proto/profiles/v1development/profiles.proto":
        "opentelemetry.proto.profiles.v1development.profiles_pb2",
    "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto":
        "opentelemetry.proto.collector.profiles.v1development.profiles_service_pb2",
}


def shape(fdp):
    """A file's messages, enums and services as comparable values (no options, no comments)."""
    out = {"package": fdp.package, "syntax": fdp.syntax, "deps": sorted(fdp.dependency)}

    def message(prefix, m):
        out[prefix + m.name] = {
            "fields": sorted((f.number, f.name, f.label, f.type, f.type_name,
                              m.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else "",
                              f.proto3_optional) for f in m.field),
            "reserved": sorted((r.start, r.end) for r in m.reserved_range),
        }
        for n in m.nested_type:
            message(prefix + m.name + ".", n)
        for e in m.enum_type:
            out[prefix + m.name + "." + e.name] = sorted((v.number, v.name) for v in e.value)

    for m in fdp.message_type:
        message("", m)
    for e in fdp.enum_type:
        out[e.name] = sorted((v.number, v.name) for v in e.value)
    for s in fdp.service:
        out["service " + s.name] = sorted((x.name, x.input_type, x.output_type)
                                          for x in s.method)
    return out


def main():
    src = sys.argv[1]
    errors = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        rc = protoc.main(["protoc", f"--proto_path={src}", "--include_imports",
                          f"--descriptor_set_out={out}"] + list(FILES))
        if rc:
            print(f"check_otlp_proto: protoc failed ({rc})", file=sys.stderr)
            return 1
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    ours = {f.name: f for f in fds.file}
    for name, module in FILES.items():
        official = descriptor_pb2.FileDescriptorProto()
        importlib.import_module(module).DESCRIPTOR.CopyToProto(official)
        a, b = shape(ours[name]), shape(official)
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                errors += 1
                print(f"check_otlp_proto: {name}: {key}:\n  ours     {a.get(key)}\n"
                      f"  official {b.get(key)}", file=sys.stderr)
        print(f"check_otlp_proto: {name}: {len(b)} definitions compared", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
