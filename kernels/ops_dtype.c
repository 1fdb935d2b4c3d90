/* SPDX-License-Identifier: MIT */
/* dtype helpers: names, sizes, element counts, f16/bf16 conversions and typed
 * element access.  The conversions themselves live inline in ops.h (under
 * GG_OPS_IMPL) so that the CPU references and these exported wrappers are
 * one piece of code. */
#define GG_OPS_IMPL
#include "ops.h"

#include <errno.h>
#include <string.h>

static const char *const dtype_names[GG_DT_COUNT] = {
    [GG_DT_F32] = "f32",
    [GG_DT_F16] = "f16",
    [GG_DT_BF16] = "bf16",
    [GG_DT_I32] = "i32",
    [GG_DT_I64] = "i64",
    [GG_DT_BOOL] = "bool",
};

const char *gg_dtype_name(gg_dtype dt)
{
    if ((int)dt < 0 || dt >= GG_DT_COUNT)
        return "invalid";
    return dtype_names[dt];
}

int gg_dtype_parse(const char *name, size_t len, gg_dtype *out)
{
    if (!name)
        return -EINVAL;
    for (int i = 0; i < GG_DT_COUNT; i++) {
        size_t n = strlen(dtype_names[i]);
        if (len == n && memcmp(name, dtype_names[i], n) == 0) {
            if (out)
                *out = (gg_dtype)i;
            return 0;
        }
    }
    return -EINVAL;
}

size_t gg_dtype_size(gg_dtype dt)
{
    switch (dt) {
    case GG_DT_F32:
    case GG_DT_I32:
        return 4;
    case GG_DT_F16:
    case GG_DT_BF16:
        return 2;
    case GG_DT_I64:
        return 8;
    case GG_DT_BOOL:
        return 1;
    default:
        return 0;
    }
}

/* Product of the dims; 0 for a desc that is not valid (ndim outside
 * 1..GG_MAX_DIMS, a dim < 1, or a product that does not fit in int64). */
int64_t gg_desc_numel(const gg_tensor_desc *d)
{
    if (!d || d->ndim < 1 || d->ndim > GG_MAX_DIMS)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < d->ndim; i++) {
        if (d->dims[i] < 1 || n > INT64_MAX / d->dims[i])
            return 0;
        n *= d->dims[i];
    }
    return n;
}

/* numel * element size; 0 for an invalid desc or dtype, or on overflow. */
size_t gg_desc_bytes(const gg_tensor_desc *d)
{
    int64_t n = gg_desc_numel(d);
    size_t es = d ? gg_dtype_size(d->dtype) : 0;
    if (n <= 0 || es == 0 || (uint64_t)n > SIZE_MAX / es)
        return 0;
    return (size_t)n * es;
}

float gg_f16_to_f32(uint16_t h)
{
    return gg_f16_to_f32_inl(h);
}

uint16_t gg_f32_to_f16(float f)
{
    return gg_f32_to_f16_inl(f);
}

float gg_bf16_to_f32(uint16_t b)
{
    return gg_bf16_to_f32_inl(b);
}

uint16_t gg_f32_to_bf16(float f)
{
    return gg_f32_to_bf16_inl(f);
}

double gg_load_f64(const void *p, gg_dtype dt, int64_t i)
{
    switch (dt) {
    case GG_DT_F32:
        return ((const float *)p)[i];
    case GG_DT_F16:
        return gg_f16_to_f32_inl(((const uint16_t *)p)[i]);
    case GG_DT_BF16:
        return gg_bf16_to_f32_inl(((const uint16_t *)p)[i]);
    case GG_DT_I32:
        return ((const int32_t *)p)[i];
    case GG_DT_I64:
        return (double)((const int64_t *)p)[i];
    case GG_DT_BOOL:
        return ((const uint8_t *)p)[i] != 0;
    default:
        return 0.0;
    }
}

int64_t gg_load_i64(const void *p, gg_dtype dt, int64_t i)
{
    switch (dt) {
    case GG_DT_I32:
        return ((const int32_t *)p)[i];
    case GG_DT_I64:
        return ((const int64_t *)p)[i];
    case GG_DT_BOOL:
        return ((const uint8_t *)p)[i] != 0;
    default:
        return gg_f_to_i64_inl(gg_load_f64(p, dt, i));
    }
}

void gg_store_i64(void *p, gg_dtype dt, int64_t i, int64_t v)
{
    switch (dt) {
    case GG_DT_F32:
        ((uint32_t *)p)[i] = gg_i64_to_fbits_inl(v, dt);
        break;
    case GG_DT_F16:
    case GG_DT_BF16:
        ((uint16_t *)p)[i] = (uint16_t)gg_i64_to_fbits_inl(v, dt);
        break;
    case GG_DT_I32:
        ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v; /* the low 32 bits */
        break;
    case GG_DT_I64:
        ((int64_t *)p)[i] = v;
        break;
    case GG_DT_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    default:
        break;
    }
}

float gg_load(const void *p, gg_dtype dt, int64_t i)
{
    switch (dt) {
    case GG_DT_F32:
        return ((const float *)p)[i];
    case GG_DT_F16:
        return gg_f16_to_f32_inl(((const uint16_t *)p)[i]);
    case GG_DT_BF16:
        return gg_bf16_to_f32_inl(((const uint16_t *)p)[i]);
    case GG_DT_I32:
    case GG_DT_I64:
    case GG_DT_BOOL:
        return (float)gg_i64_round_inl(gg_load_i64(p, dt, i), 24);
    default:
        return 0.0f;
    }
}

void gg_store(void *p, gg_dtype dt, int64_t i, float v)
{
    switch (dt) {
    case GG_DT_F32:
        ((float *)p)[i] = v;
        break;
    case GG_DT_F16:
        ((uint16_t *)p)[i] = gg_f32_to_f16_inl(v);
        break;
    case GG_DT_BF16:
        ((uint16_t *)p)[i] = gg_f32_to_bf16_inl(v);
        break;
    case GG_DT_I32:
        ((int32_t *)p)[i] = gg_f_to_i32_inl(v);
        break;
    case GG_DT_I64:
        ((int64_t *)p)[i] = gg_f_to_i64_inl(v);
        break;
    case GG_DT_BOOL:
        ((uint8_t *)p)[i] = v != 0.0f;
        break;
    default:
        break;
    }
}
