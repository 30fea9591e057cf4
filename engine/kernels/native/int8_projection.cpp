// Decider's exact int8 projection as a native OpenVINO operation (see engine/kernels/native_op.py).
//
// y[t, n] = scale[n] · (Σ_i s_i·⟨w_n, p_i⟩ − zp[n]·Σx̂_t), the same arithmetic as the JIT kernel's AVX2 instruction set
// (engine/kernels/kernel_ir.py): each token's f32 activations split into two signed 16-bit pieces (|p| ≤ 4096,
// x̂ within max|x|·2⁻²⁶), the u8 weights widened to 16 bits and multiplied with vpmaddwd (exact in int32 lanes up
// to 16,448 columns), the lanes summed in int64, combined in double in the same order and rounded once to f32 — so
// its outputs equal the JIT kernel's bit for bit. Built without FMA contraction (CMakeLists.txt) for that reason.
//
// Inputs: x f32 [B, T, K]; w u8 [N, Kp] (Kp = K padded to 16; rows below N − N mod 4 packed in groups of 4
// interleaved by 16 bytes, as engine/kernels/int8_matvec.py packs them); scale and zp as the bytes of f64 [N]
// (bytes, so no precision pass of the plugin converts them). Output f32 [B, T, N]. The rows are shared between the
// plugin's threads (TBB, static) when the weights are large enough to pay for the hand-off.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <openvino/core/extension.hpp>
#include <openvino/core/op_extension.hpp>
#include <openvino/core/parallel.hpp>
#include <openvino/op/op.hpp>

namespace {

constexpr int kPieces = 2;
constexpr double kBound = 4096.0;
constexpr int kStep = 16;  // weights per vector (widened to 16 bits)
constexpr int kPack = 4;
constexpr int kMaxTokens = 8;
constexpr size_t kMinSplitBytes = size_t(1) << 20;
constexpr int64_t kMaxColumns = 16448;  // two products ≤ 255·4096 a lane per 16 columns stay below 2³¹ up to here

// Per token: m = max|x|, s1 = m/b (1 where m = 0), s2 = s1/2b; each piece the rounded remainder after the one
// before (round half to even, as LLVM's rint; clamped to ±b); padding zero; coef = (s1, s2, Σx̂). Four columns at a
// time in double (a libm call per rounding cost more than the products of a small matrix); Σx̂ summed column by
// column in order, as the JIT kernel sums it.
__attribute__((target("avx2"))) void split(const float* x, size_t tokens, size_t k, size_t kp, int16_t* pieces,
                                           double* coef) {
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m256d lo = _mm256_set1_pd(-kBound), hi = _mm256_set1_pd(kBound), zero = _mm256_setzero_pd();
    for (size_t j = 0; j < tokens; ++j) {
        const float* row = x + j * k;
        __m256 mv = _mm256_setzero_ps();
        const __m256 sign = _mm256_set1_ps(-0.0f);
        size_t i = 0;
        for (; i + 8 <= k; i += 8) mv = _mm256_max_ps(mv, _mm256_andnot_ps(sign, _mm256_loadu_ps(row + i)));
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, mv);
        float m = 0.0f;
        for (float v : lanes) m = std::fmax(m, v);
        for (; i < k; ++i) m = std::fmax(m, std::fabs(row[i]));
        const double md = m;
        const double s1 = md == 0.0 ? 1.0 : md / kBound;
        const double s2 = s1 / (2 * kBound);
        const __m256d v1 = _mm256_set1_pd(s1), v2 = _mm256_set1_pd(s2);
        const __m256d i1 = _mm256_set1_pd(1.0 / s1), i2 = _mm256_set1_pd(1.0 / s2);
        int16_t* p1 = pieces + (j * kPieces) * kp;
        int16_t* p2 = p1 + kp;
        double sum = 0.0;
        for (size_t q = 0; q < kp; q += 4) {
            alignas(32) double in[4] = {0.0, 0.0, 0.0, 0.0};
            for (size_t c = 0; c < 4 && q + c < k; ++c) in[c] = row[q + c];
            const __m256d xd = _mm256_load_pd(in);
            const __m256d a = _mm256_min_pd(_mm256_max_pd(_mm256_round_pd(_mm256_mul_pd(xd, i1), kRound), lo), hi);
            const __m256d h1 = _mm256_mul_pd(a, v1);
            const __m256d r1 = _mm256_sub_pd(xd, h1);
            const __m256d b = _mm256_min_pd(_mm256_max_pd(_mm256_round_pd(_mm256_mul_pd(r1, i2), kRound), lo), hi);
            const __m256d u1 = _mm256_add_pd(h1, _mm256_add_pd(_mm256_mul_pd(b, v2), zero));
            alignas(32) double av[4], bv[4], uv[4];
            _mm256_store_pd(av, a);
            _mm256_store_pd(bv, b);
            _mm256_store_pd(uv, u1);
            for (size_t c = 0; c < 4; ++c) {
                const bool inside = q + c < k;  // padding: zero pieces, nothing summed
                p1[q + c] = inside ? static_cast<int16_t>(av[c]) : 0;
                p2[q + c] = inside ? static_cast<int16_t>(bv[c]) : 0;
                if (inside) sum = sum + uv[c];
            }
        }
        coef[j * (kPieces + 1) + 0] = s1;
        coef[j * (kPieces + 1) + 1] = s2;
        coef[j * (kPieces + 1) + 2] = sum;
    }
}

__attribute__((target("avx2"))) inline int64_t lane_sum(__m256i v) {
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
    int64_t s = 0;
    for (int i = 0; i < 8; ++i) s += lanes[i];
    return s;
}

// R rows against T tokens: each weight vector loaded once, every piece of every token in its own accumulator.
// Row r's i-th weight at w + r·rs + i·km (packed: rs = 16, km = 4; plain: rs = ldw, km = 1).
template <int R, int T>
__attribute__((target("avx2"))) inline void block(const uint8_t* w, size_t rs, size_t km, size_t kp, const int16_t* pc,
                                                  const double* coef, const double* scale, const double* zp, float* out,
                                                  size_t ldo) {
    // Fully unrolled (GCC keeps the accumulators in registers only then): R·T·2 = 8 of the 16 vector registers for
    // one or two tokens; from three tokens on (R = 1) 2·T, which spills from eight tokens (only the one-token step
    // graph runs this operation: engine/kernels/native_steps.py).
    __m256i acc[R][T][kPieces];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
            for (int p = 0; p < kPieces; ++p) acc[r][t][p] = _mm256_setzero_si256();
    for (size_t i = 0; i < kp; i += kStep) {
        // The weights fetched 1 KiB ahead of the stream. Measured at 0.8B, 1 thread, the projections' time over the
        // plugin's in the same run: 0.84 without, 0.71 with this (512 B ahead 0.75, 2 KiB 0.71 and 1 KiB
        // non-temporal 0.70, each non-temporal: the same within the runs' noise).
        _mm_prefetch(reinterpret_cast<const char*>(w + i * km) + 1024, _MM_HINT_T0);
        __m256i wv[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
            wv[r] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + r * rs + i * km)));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
            for (int p = 0; p < kPieces; ++p) {
                const __m256i pv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pc + (t * kPieces + p) * kp + i));
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) acc[r][t][p] = _mm256_add_epi32(acc[r][t][p], _mm256_madd_epi16(wv[r], pv));
            }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) {
            const double* c = coef + t * (kPieces + 1);
            const double m0 = c[0] * static_cast<double>(lane_sum(acc[r][t][0]));
            const double m1 = c[1] * static_cast<double>(lane_sum(acc[r][t][1]));
            const double s1 = m1 + 0.0;
            const double s0 = m0 + s1;
            const double d = s0 - zp[r] * c[kPieces];
            out[t * ldo + r] = static_cast<float>(d * scale[r]);
        }
}

// Rows n0 ≤ n < n1: a block where n is a multiple of the block and a whole block fits, else one row.
template <int T>
__attribute__((target("avx2"))) void rows(const uint8_t* w, size_t ldw, size_t kp, const int16_t* pc, const double* coef,
                                          const double* scale, const double* zp, float* out, size_t ldo, size_t n0,
                                          size_t n1, size_t npacked) {
    constexpr int R = T == 1 ? 4 : (T == 2 ? 2 : 1);
    auto at = [&](size_t n, size_t& rs, size_t& km) -> const uint8_t* {
        if (n < npacked) {
            rs = kStep;
            km = kPack;
            return w + (n & ~size_t(kPack - 1)) * ldw + (n & (kPack - 1)) * kStep;
        }
        rs = ldw;
        km = 1;
        return w + n * ldw;
    };
    size_t n = n0;
    while (n < n1) {
        size_t rs, km;
        const uint8_t* wp = at(n, rs, km);
        if (n + R <= n1 && n % R == 0) {
            block<R, T>(wp, rs, km, kp, pc, coef, scale + n, zp + n, out + n, ldo);
            n += R;
        } else {
            block<1, T>(wp, rs, km, kp, pc, coef, scale + n, zp + n, out + n, ldo);
            n += 1;
        }
    }
}

using RowsFn = void (*)(const uint8_t*, size_t, size_t, const int16_t*, const double*, const double*, const double*,
                        float*, size_t, size_t, size_t, size_t);
const RowsFn kRows[kMaxTokens] = {rows<1>, rows<2>, rows<3>, rows<4>, rows<5>, rows<6>, rows<7>, rows<8>};

}  // namespace

namespace decider {

class Int8Projection : public ov::op::Op {
public:
    OPENVINO_OP("DeciderInt8Projection", "decider");

    Int8Projection() = default;
    explicit Int8Projection(const ov::OutputVector& args) : Op(args) { constructor_validate_and_infer_types(); }

    void validate_and_infer_types() override {
        const auto x = get_input_partial_shape(0);
        const auto w = get_input_partial_shape(1);
        OPENVINO_ASSERT(x.rank().is_static() && x.rank().get_length() == 3, "x must be [B, T, K]");
        OPENVINO_ASSERT(w.rank().is_static() && w.rank().get_length() == 2, "w must be [N, Kp]");
        if (x[2].is_static() && w[1].is_static()) {
            const int64_t k = x[2].get_length(), kp = w[1].get_length();
            OPENVINO_ASSERT(kp == (k + kStep - 1) / kStep * kStep, "w's columns must be x's padded to 16");
            OPENVINO_ASSERT(kp <= kMaxColumns, "more columns than int32 lanes sum exactly");
        }
        set_output_type(0, ov::element::f32, ov::PartialShape{x[0], x[1], w[0]});
    }

    std::shared_ptr<ov::Node> clone_with_new_inputs(const ov::OutputVector& args) const override {
        return std::make_shared<Int8Projection>(args);
    }

    bool visit_attributes(ov::AttributeVisitor&) override { return true; }
    bool has_evaluate() const override { return true; }

    bool evaluate(ov::TensorVector& outputs, const ov::TensorVector& inputs) const override {
        const ov::Shape xs = inputs[0].get_shape();
        const ov::Shape ws = inputs[1].get_shape();
        const size_t batch = xs[0], tokens = xs[1], k = xs[2], n = ws[0], kp = ws[1];
        outputs[0].set_shape({batch, tokens, n});
        const size_t total = batch * tokens;
        if (total == 0 || n == 0) return true;
        const float* x = inputs[0].data<const float>();
        const uint8_t* w = inputs[1].data<const uint8_t>();
        const double* scale = reinterpret_cast<const double*>(inputs[2].data<const uint8_t>());
        const double* zp = reinterpret_cast<const double*>(inputs[3].data<const uint8_t>());
        float* out = outputs[0].data<float>();
        const size_t npacked = n / kPack * kPack;
        thread_local std::vector<int16_t> pieces;
        thread_local std::vector<double> coef;
        pieces.resize(kMaxTokens * kPieces * kp);
        coef.resize(kMaxTokens * (kPieces + 1));
        const int threads = n * kp >= kMinSplitBytes ? parallel_get_max_threads() : 1;
        for (size_t start = 0; start < total; start += kMaxTokens) {
            const size_t t = std::min<size_t>(kMaxTokens, total - start);
            split(x + start * k, t, k, kp, pieces.data(), coef.data());
            const RowsFn fn = kRows[t - 1];
            float* o = out + start * n;
            const int16_t* pc = pieces.data();
            const double* cf = coef.data();
            if (threads <= 1) {
                fn(w, kp, kp, pc, cf, scale, zp, o, n, 0, n, npacked);
                continue;
            }
            ov::parallel_nt_static(threads, [&](const int ithr, const int nthr) {
                // equal shares in whole groups of 4 rows
                const size_t lo = std::min(n, (n * ithr / nthr + kPack - 1) / kPack * kPack);
                const size_t hi = ithr + 1 == nthr ? n : std::min(n, (n * (ithr + 1) / nthr + kPack - 1) / kPack * kPack);
                if (lo < hi) fn(w, kp, kp, pc, cf, scale, zp, o, n, lo, hi, npacked);
            });
        }
        return true;
    }
};

}  // namespace decider

OPENVINO_CREATE_EXTENSIONS(std::vector<ov::Extension::Ptr>({std::make_shared<ov::OpExtension<decider::Int8Projection>>()}));
