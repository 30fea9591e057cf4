// Decider's one-token Gated DeltaNet update as a native OpenVINO operation (see engine/kernels/native_deltanet.py);
// registered with the int8 projection by int8_projection.cpp's extension list.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <openvino/core/parallel.hpp>
#include <openvino/op/op.hpp>

namespace decider {

// One Gated DeltaNet head-step for one token (engine/graphs/decode.py's one-token path, fused): per head,
//   [qS; kS] = [q; k]ᵀS,  delta = (v − e·kS)·beta,  S' = e·S + k ⊗ delta,  o = e·qS + (q·k)·delta,  e = exp(g)
// with S read from memory once (its head, 64 KiB at Dk = Dv = 128, stays in L2 for the second pass that writes S')
// instead of twice. Products and sums in f32 (fused multiply-adds), as the plugin's MatMul and eltwise nodes round.
// Inputs: q, k [b, H, 1, Dk], v [b, H, 1, Dv], g, beta [b, H, 1], S [1 or b, H, Dk, Dv]; outputs o [b, H, 1, Dv] and
// S' [b, H, Dk, Dv] (b: the step's rows, none or one; the state's one row broadcasts).
class DeltaNetStep : public ov::op::Op {
public:
    OPENVINO_OP("DeciderDeltaNetStep", "decider");

    DeltaNetStep() = default;
    explicit DeltaNetStep(const ov::OutputVector& args) : Op(args) { constructor_validate_and_infer_types(); }

    void validate_and_infer_types() override {
        const auto q = get_input_partial_shape(0), v = get_input_partial_shape(2), s = get_input_partial_shape(5);
        OPENVINO_ASSERT(q.rank().is_static() && q.rank().get_length() == 4, "q must be [b, H, 1, Dk]");
        OPENVINO_ASSERT(s.rank().is_static() && s.rank().get_length() == 4, "the state must be [1 or b, H, Dk, Dv]");
        for (size_t i = 0; i < 6; ++i) OPENVINO_ASSERT(get_input_element_type(i) == ov::element::f32, "f32 inputs only");
        set_output_type(0, ov::element::f32, ov::PartialShape{q[0], q[1], 1, v[3]});
        set_output_type(1, ov::element::f32, ov::PartialShape{q[0], s[1], s[2], s[3]});
    }

    std::shared_ptr<ov::Node> clone_with_new_inputs(const ov::OutputVector& args) const override {
        return std::make_shared<DeltaNetStep>(args);
    }

    bool visit_attributes(ov::AttributeVisitor&) override { return true; }
    bool has_evaluate() const override { return true; }

    bool evaluate(ov::TensorVector& outputs, const ov::TensorVector& inputs) const override {
        const ov::Shape qs = inputs[0].get_shape(), ss = inputs[5].get_shape();
        const size_t rows = qs[0], heads = ss[1], dk = ss[2], dv = ss[3];
        outputs[0].set_shape({rows, heads, 1, dv});
        outputs[1].set_shape({rows, heads, dk, dv});
        if (rows == 0) return true;
        OPENVINO_ASSERT(rows == 1, "one sequence at a time");
        const float* q = inputs[0].data<const float>();
        const float* k = inputs[1].data<const float>();
        const float* v = inputs[2].data<const float>();
        const float* g = inputs[3].data<const float>();
        const float* beta = inputs[4].data<const float>();
        const float* state = inputs[5].data<const float>();
        float* out = outputs[0].data<float>();
        float* next = outputs[1].data<float>();
        const int threads = parallel_get_max_threads();
        ov::parallel_nt_static(threads, [&](const int ithr, const int nthr) {
            std::vector<float> qs(dv), ks(dv), delta(dv);
            const size_t first = heads * ithr / nthr, last = heads * (ithr + 1) / nthr;
            for (size_t h = first; h < last; ++h)
                head(q + h * dk, k + h * dk, v + h * dv, g[h], beta[h], state + h * dk * dv, dk, dv, qs.data(),
                     ks.data(), delta.data(), out + h * dv, next + h * dk * dv,
                     h + 1 < last ? state + (h + 1) * dk * dv : nullptr);
        });
        return true;
    }

private:
    __attribute__((target("avx2,fma"))) static void head(const float* q, const float* k, const float* v, float g, float beta, const float* s, size_t dk,
                     size_t dv, float* qs, float* ks, float* delta, float* out, float* next, const float* ahead) {
        std::fill(qs, qs + dv, 0.0f);
        std::fill(ks, ks + dv, 0.0f);
        const size_t whole = dv / 8 * 8;
        for (size_t i = 0; i < dk; ++i) {  // one read of S; each sum in i's order, as one fma a step (vectors over j)
            const float* row = s + i * dv;
            const float qi = q[i], ki = k[i];
            const __m256 qv = _mm256_set1_ps(qi), kv = _mm256_set1_ps(ki);
            for (size_t j = 0; j < whole; j += 8) {  // written out: the compiler left this loop scalar (140 µs a layer)
                const __m256 r = _mm256_loadu_ps(row + j);
                _mm256_storeu_ps(qs + j, _mm256_fmadd_ps(qv, r, _mm256_loadu_ps(qs + j)));
                _mm256_storeu_ps(ks + j, _mm256_fmadd_ps(kv, r, _mm256_loadu_ps(ks + j)));
            }
            for (size_t j = whole; j < dv; ++j) {
                qs[j] = std::fma(qi, row[j], qs[j]);
                ks[j] = std::fma(ki, row[j], ks[j]);
            }
        }
        const float e = std::exp(g);
        float qk = 0.0f;
        for (size_t i = 0; i < dk; ++i) qk = std::fma(q[i], k[i], qk);
        for (size_t j = 0; j < dv; ++j) {
            delta[j] = (v[j] - ks[j] * e) * beta;
            out[j] = std::fma(qk, delta[j], qs[j] * e);
        }
        // S' from the head still in cache, streamed past the caches (read again only next step, after the whole
        // model's weights): no read for ownership of its lines. A state buffer need not start on 32 bytes (the plugin's
        // variable memory did not): each row streams from its first aligned float, the few before it stored plainly.
        // The next head's state is fetched meanwhile: its read overlaps these writes instead of waiting for them.
        const __m256 ev = _mm256_set1_ps(e);
        for (size_t i = 0; i < dk; ++i) {
            if (ahead != nullptr)
                for (size_t line = 0; line < dv; line += 16) _mm_prefetch(reinterpret_cast<const char*>(ahead + i * dv + line), _MM_HINT_T0);
            const float* row = s + i * dv;
            float* to = next + i * dv;
            const float ki = k[i];
            const __m256 kv = _mm256_set1_ps(ki);
            size_t j = 0;
            for (; j < dv && reinterpret_cast<uintptr_t>(to + j) % 32 != 0; ++j) to[j] = std::fma(ki, delta[j], row[j] * e);
            for (; j + 8 <= dv; j += 8)
                _mm256_stream_ps(to + j, _mm256_fmadd_ps(kv, _mm256_loadu_ps(delta + j), _mm256_mul_ps(_mm256_loadu_ps(row + j), ev)));
            for (; j < dv; ++j) to[j] = std::fma(ki, delta[j], row[j] * e);
        }
        _mm_sfence();  // the streamed lines visible before another thread's node reads them
    }
};

}  // namespace decider
