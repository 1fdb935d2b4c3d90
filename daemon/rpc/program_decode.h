/* SPDX-License-Identifier: MIT */
/* program.define's and program.rebind's params, decoded from MessagePack
 * into the core's plain structs (core/program_spec.h). */
#ifndef GG_PROGRAM_DECODE_H
#define GG_PROGRAM_DECODE_H

#include "core/program_spec.h"
#include "proto.h"

/* Decode a program.define params map (NULL: none) into spec, first
 * refusing a key that a tensor or a node does not take, or an attribute
 * its op does not have: -EINVAL naming it and listing what is accepted.
 * Everything else the client got wrong is kept in the spec for the core
 * to report in its order.  The spec's strings point into params, which
 * must outlive it.  0, -EINVAL or -ENOMEM; free the spec in every case. */
int gg_decode_define(const msgpack_object *params, gg_program_spec *spec, proto_errbuf *e);
void gg_decode_define_free(gg_program_spec *spec);

/* The same for program.rebind's tensors (NULL: absent). */
int gg_decode_rebind(const msgpack_object *tensors, gg_rebind_spec *spec, proto_errbuf *e);
void gg_decode_rebind_free(gg_rebind_spec *spec);

#endif
