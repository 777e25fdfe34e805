# SPDX-License-Identifier: BSD-2-Clause
# bash completion for profctl: commands, each command's options, the values of --format,
# --sort and --value, and file names where a file is wanted (-o, --socket, the profiles of diff).
# Install as /usr/share/bash-completion/completions/profctl, or source it from ~/.bashrc.

_profctl()
{
	local cur prev cmd i w
	local commands="status dump top table diff report record help"
	local global_opts="--socket --timeout --help --version -h -V"

	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}

	# The command is the first word that is neither a global option nor its value.
	cmd=
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		--socket | --timeout)
			((i++))
			;;
		-*) ;;
		*)
			cmd=$w
			break
			;;
		esac
	done

	# Values of options, wherever they are.
	case $prev in
	--socket | -o | --output)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return 0
		;;
	--format)
		if [[ $cmd == diff ]]; then
			mapfile -t COMPREPLY < <(compgen -W "svg folded" -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "folded svg pprof speedscope json" -- "$cur")
		fi
		return 0
		;;
	--sort)
		mapfile -t COMPREPLY < <(compgen -W "self total" -- "$cur")
		return 0
		;;
	--value)
		mapfile -t COMPREPLY < <(compgen -W "cpu gpu gpu-kernels copy copy-bytes launches off-cpu wall \
			gpu-memory gpu-memory-live" -- "$cur")
		return 0
		;;
	--before | --after)
		mapfile -t COMPREPLY < <(compgen -W "10m..5m 5m..now 1h..30m 30m..now" -- "$cur")
		return 0
		;;
	--timeout | --since | --interval | --window)
		mapfile -t COMPREPLY < <(compgen -W "500ms 1s 5s 10s 30s 1m 5m 1h" -- "$cur")
		return 0
		;;
	--pid | --tid | --limit | --top)
		return 0
		;;
	esac

	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "$global_opts" -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
		fi
		return 0
	fi

	case $cmd in
	status)
		mapfile -t COMPREPLY < <(compgen -W "--json --timeout --help" -- "$cur")
		;;
	dump)
		# "dump" takes what to dump first.
		if [[ $prev == dump ]]; then
			mapfile -t COMPREPLY < <(compgen -W "flamegraph trace stacks --help" -- "$cur")
		elif [[ " ${COMP_WORDS[*]} " == *" stacks "* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "--pid --json -o --output --timeout --help" \
				-- "$cur")
		elif [[ " ${COMP_WORDS[*]} " == *" trace "* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "--pid --since -o --output --timeout --help" \
				-- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "--pid --tid --since --format -o --output --python-only
				--all-frames --function --no-lineno --per-thread --children --value --gpu-idle --nvtx --thread-state --timeout --help" -- "$cur")
		fi
		;;
	record)
		# Options until the command; after it, the command's own words.
		if [[ " ${COMP_WORDS[*]:0:COMP_CWORD} " == *" -- "* ]]; then
			mapfile -t COMPREPLY < <(compgen -c -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "-o --output --format --duration
				--python-only --all-frames --timeout --help --" -- "$cur")
		fi
		;;
	report)
		mapfile -t COMPREPLY < <(compgen -W "--pid --since --top --json --timeout --help" \
			-- "$cur")
		;;
	top)
		mapfile -t COMPREPLY < <(compgen -W "--pid --interval --window --sort --limit
			--function --no-lineno --lines --native --python-only --all-frames --per-thread
			--value --timeout --help" -- "$cur")
		;;
	table)
		mapfile -t COMPREPLY < <(compgen -W "--pid --tid --since --sort --limit --function
			--no-lineno --lines --native --python-only --all-frames --per-thread --value
			--timeout --help" \
			-- "$cur")
		;;
	diff)
		if [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "--before --after --pid --format -o
				--output --timeout --help" -- "$cur")
		else
			# A and B: folded or pprof files.
			compopt -o filenames 2>/dev/null
			mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		fi
		;;
	help)
		mapfile -t COMPREPLY < <(compgen -W "status dump top table diff report record" -- "$cur")
		;;
	esac
	return 0
}

complete -F _profctl profctl
