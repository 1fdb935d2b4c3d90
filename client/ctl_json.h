/* SPDX-License-Identifier: MIT */
/* A small msgpack_object -> JSON printer for gfxgraphctl --json, and the
 * text helpers its tables share. */
#ifndef GG_CTL_JSON_H
#define GG_CTL_JSON_H

#include <msgpack.h>
#include <stddef.h>
#include <stdio.h>

/* Pretty-printed JSON (2-space indent) of o, newline-terminated.  Strings
 * are escaped and made valid UTF-8 (bad bytes become U+FFFD); map keys that
 * are not strings are written as strings of their JSON text; floats get the
 * fewest digits that read back to the same value, NaN and infinities become
 * null; bin is a hex string; ext is {"ext": type, "data": hex}. */
void ctl_json_print(FILE *f, const msgpack_object *o);

/* The JSON number text of a float (as above); "null" for NaN / inf. */
void ctl_json_number(char *buf, size_t len, double v, int is_f32);

/* A one-line rendering of o for a table cell: nil "-", bools "yes"/"no",
 * floats with `decimals` decimals, strings with control characters replaced,
 * arrays comma-joined, maps as compact JSON. */
void ctl_cell(char *buf, size_t len, const msgpack_object *o, int decimals);

/* Columns taken by a cell's text (code points; cells are valid UTF-8). */
size_t ctl_width(const char *s);

#endif
