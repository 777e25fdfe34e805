// SPDX-License-Identifier: BSD-2-Clause
#include "intern.h"
#include "grow.h"
#include "hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct intern {
	char **keys;
	size_t *lens;
	size_t n, cap_keys, cap_lens;
	uint32_t *slots; /* key index + 1, 0 empty; open addressing, power-of-two size */
	size_t n_slots;
};

static uint64_t hash(const void *key, size_t len)
{
	uint64_t h = hash_bytes(key, len);

	return h ^ (h >> 31);
}

struct intern *intern__new(void)
{
	return calloc(1, sizeof(struct intern));
}

void intern__free(struct intern *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->keys[i]);
	free(t->keys);
	free(t->lens);
	free(t->slots);
	free(t);
}

static int grow_slots(struct intern *t)
{
	size_t n = t->n_slots ? t->n_slots * 2 : 256;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		size_t j = hash(t->keys[i], t->lens[i]) & (n - 1);

		while (s[j])
			j = (j + 1) & (n - 1);
		s[j] = (uint32_t)i + 1;
	}
	free(t->slots);
	t->slots = s;
	t->n_slots = n;
	return 0;
}

int64_t intern__add(struct intern *t, const void *key, size_t len, int *added)
{
	size_t j;
	char *copy;
	int err;

	if (added)
		*added = 0;
	/* Keep the load under one half so probe runs stay short. */
	if ((t->n + 1) * 2 > t->n_slots) {
		err = grow_slots(t);
		if (err)
			return err;
	}
	for (j = hash(key, len) & (t->n_slots - 1); t->slots[j]; j = (j + 1) & (t->n_slots - 1)) {
		uint32_t i = t->slots[j] - 1;

		if (t->lens[i] == len && memcmp(t->keys[i], key, len) == 0)
			return i;
	}
	if (t->n >= UINT32_MAX - 1)
		return -E2BIG;
	err = GROW(t->keys, t->cap_keys, t->n + 1);
	if (!err)
		err = GROW(t->lens, t->cap_lens, t->n + 1);
	if (err)
		return err;
	copy = malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	if (len)
		memcpy(copy, key, len);
	copy[len] = '\0';
	t->keys[t->n] = copy;
	t->lens[t->n] = len;
	t->slots[j] = (uint32_t)++t->n;
	if (added)
		*added = 1;
	return (int64_t)t->n - 1;
}

int64_t intern__str(struct intern *t, const char *s)
{
	return intern__add(t, s, strlen(s), NULL);
}

size_t intern__count(const struct intern *t)
{
	return t->n;
}

char **intern__keys(const struct intern *t)
{
	return t->keys;
}

size_t intern__key_len(const struct intern *t, size_t idx)
{
	return t->lens[idx];
}
