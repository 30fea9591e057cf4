// Decider's exact int8 projection as a native OpenVINO operation (see engine/kernels/native_op.py).
//
// y[t, n] = scale[n] · (Σ_i s_i·⟨w_n, p_i⟩ − zp[n]·Σx̂_t), the same arithmetic as the JIT kernel's (engine/kernels/
// kernel_ir.py) for the instruction set the operation's `isa` attribute names, so its outputs equal the JIT kernel's
// bit for bit (built without FMA contraction, CMakeLists.txt, for that reason):
//   avx2         each token's f32 activations split into two signed 16-bit pieces (|p| ≤ 4096, x̂ within
//                max|x|·2⁻²⁶), the u8 weights widened to 16 bits and multiplied with vpmaddwd (exact in int32 lanes up
//                to 16,448 columns);
//   avx512_vnni  four signed 8-bit pieces (|p| ≤ 127, x̂ within max|x|·2⁻³¹), the u8 weights as they are against
//                them with vpdpbusd on 256-bit vectors (four products a lane, exact; the JIT kernel's VNNI_256) — no
//                widening: the weights stream at the memory's rate, not the converter's.
// The lanes summed in int64, the pieces' shares combined in double in the same order and rounded once to f32.
//
// Inputs: x f32 [B, T, K]; w u8 [N, Kp] (Kp = K padded to the instruction set's vector of weights, 16 or 32; rows
// below N − N mod 4 packed in groups of 4 interleaved by that vector, as engine/kernels/int8_matvec.py packs them);
// scale and zp as the bytes of f64 [N] (bytes, so no precision pass of the plugin converts them). Outputs f32
// [B, T, rows[i]] (the `rows` attribute: several projections of the same x as one operation), or one [B, T, N]. The
// rows are shared between the plugin's threads (TBB, static) when the weights are large enough to pay for the
// hand-off.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <openvino/core/extension.hpp>
#include <openvino/core/op_extension.hpp>
#include <openvino/core/parallel.hpp>
#include <openvino/op/op.hpp>

#include "deltanet_step.hpp"
#include "conv_step.hpp"

namespace {

constexpr int kPack = 4;
constexpr int kMaxTokens = 8;
constexpr size_t kMinSplitBytes = size_t(1) << 20;

// Four columns' pieces (a[p], integer-valued) from their activations; returns their x̂, the pieces' shares summed
// smallest first.
template <int P>
__attribute__((target("avx2"))) inline __m256d pieces_of(__m256d rest, const __m256d (&iv)[P], const __m256d (&sv)[P],
                                                         double bound, __m256d (&a)[P]) {
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m256d lo = _mm256_set1_pd(-bound), hi = _mm256_set1_pd(bound);
    __m256d share[P];
    for (int p = 0; p < P; ++p) {
        a[p] = _mm256_min_pd(_mm256_max_pd(_mm256_round_pd(_mm256_mul_pd(rest, iv[p]), kRound), lo), hi);
        share[p] = _mm256_mul_pd(a[p], sv[p]);
        rest = _mm256_sub_pd(rest, share[p]);
    }
    __m256d hat = _mm256_add_pd(share[P - 1], _mm256_setzero_pd());
    for (int p = P - 2; p >= 0; --p) hat = _mm256_add_pd(share[p], hat);
    return hat;
}

// Per token: m = max|x|, s1 = m/b (1 where m = 0), s_{i+1} = s_i/2b; each piece the rounded remainder after the ones
// before (round half to even, as LLVM's rint; clamped to ±b); padding zero; coef = (s1 … sP, Σx̂). Four columns at a
// time in double (a libm call per rounding cost more than the products of a small matrix); x̂ summed smallest share
// first and Σx̂ column by column in order, as the JIT kernel sums them.
template <typename Piece, int P>
__attribute__((target("avx2"))) void split(const float* x, size_t tokens, size_t k, size_t kp, double bound,
                                           Piece* pieces, double* coef) {
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
        double s[P];
        s[0] = md == 0.0 ? 1.0 : md / bound;
        for (int p = 1; p < P; ++p) s[p] = s[p - 1] / (2 * bound);
        __m256d sv[P], iv[P];
        for (int p = 0; p < P; ++p) {
            sv[p] = _mm256_set1_pd(s[p]);
            iv[p] = _mm256_set1_pd(1.0 / s[p]);
        }
        Piece* out = pieces + j * P * kp;
        double sum = 0.0;
        // Whole groups of four columns: the pieces packed and stored four at a time; Σx̂ still summed one column
        // after another (the JIT kernel's order, so the bits stay the same)
        const size_t whole = k / 4 * 4;
        for (size_t q = 0; q < whole; q += 4) {
            __m256d a[P];
            const __m256d hat = pieces_of<P>(_mm256_cvtps_pd(_mm_loadu_ps(row + q)), iv, sv, bound, a);
            for (int p = 0; p < P; ++p) {
                const __m128i words = _mm_packs_epi32(_mm256_cvtpd_epi32(a[p]), _mm_setzero_si128());  // |a| ≤ 4096
                if constexpr (sizeof(Piece) == 2) {
                    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + p * kp + q), words);
                } else {
                    const int32_t bytes = _mm_cvtsi128_si32(_mm_packs_epi16(words, words));  // |a| ≤ 127
                    std::memcpy(out + p * kp + q, &bytes, 4);
                }
            }
            const __m128d low = _mm256_castpd256_pd128(hat), high = _mm256_extractf128_pd(hat, 1);
            sum = sum + _mm_cvtsd_f64(low);
            sum = sum + _mm_cvtsd_f64(_mm_unpackhi_pd(low, low));
            sum = sum + _mm_cvtsd_f64(high);
            sum = sum + _mm_cvtsd_f64(_mm_unpackhi_pd(high, high));
        }
        for (size_t q = whole; q < kp; q += 4) {  // the last columns and the padding
            alignas(32) double in[4] = {0.0, 0.0, 0.0, 0.0};
            for (size_t c = 0; c < 4 && q + c < k; ++c) in[c] = row[q + c];
            __m256d a[P];
            const __m256d hat = pieces_of<P>(_mm256_load_pd(in), iv, sv, bound, a);
            alignas(32) double pv[P][4];
            for (int p = 0; p < P; ++p) _mm256_store_pd(pv[p], a[p]);
            alignas(32) double uv[4];
            _mm256_store_pd(uv, hat);
            for (size_t c = 0; c < 4; ++c) {
                const bool inside = q + c < k;  // padding: zero pieces, nothing summed
                for (int p = 0; p < P; ++p) out[p * kp + q + c] = inside ? static_cast<Piece>(pv[p][c]) : Piece(0);
                if (inside) sum = sum + uv[c];
            }
        }
        for (int p = 0; p < P; ++p) coef[j * (P + 1) + p] = s[p];
        coef[j * (P + 1) + P] = sum;
    }
}

// One row and token: the pieces' shares summed smallest first, less the zero point's share, times the scale.
template <int P>
inline float combine(const int64_t* sums, const double* c, double zp, double scale) {
    double s = c[P - 1] * static_cast<double>(sums[P - 1]) + 0.0;
    for (int p = P - 2; p >= 0; --p) s = c[p] * static_cast<double>(sums[p]) + s;
    return static_cast<float>((s - zp * c[P]) * scale);
}

// R rows against T tokens, each weight vector loaded once, every piece of every token in its own accumulator; row
// r's i-th weight at w + r·rs + i·km (packed: rs = the vector, km = 4; plain: rs = ldw, km = 1). Fully unrolled (GCC
// keeps the accumulators in registers only then): R·T·P of the vector registers (16 with AVX2, 32 with AVX-512) —
// R = 4, 2, 1 for 1, 2, ≥3 tokens; they spill from 8 tokens (AVX2: 3) on, which only the few-token verifies would
// reach, and those keep the plugin's kernels (engine/kernels/native_steps.py).
struct Avx2 {
    using Piece = int16_t;
    static constexpr int kPieces = 2, kStep = 16;
    static constexpr double kBound = 4096.0;
    static constexpr int64_t kMaxColumns = 16448;  // two products ≤ 255·4096 a lane per 16 columns below 2³¹
    // The weights fetched this far ahead of the stream. Measured on a Zen 3 at 0.8B (1 thread), the projections' time
    // over the plugin's in the same run: 0.84 without, 0.71 with 1 KiB (512 B ahead 0.75, 2 KiB 0.71, 1 KiB
    // non-temporal 0.70: the same within the runs' noise).
    static constexpr size_t kPrefetch = 1024;

    __attribute__((target("avx2"))) static int64_t lane_sum(__m256i v) {
        alignas(32) int32_t lanes[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
        int64_t s = 0;
        for (int i = 0; i < 8; ++i) s += lanes[i];
        return s;
    }

    template <int R, int T>
    __attribute__((target("avx2"))) static void block(const uint8_t* w, size_t rs, size_t km, size_t kp, const Piece* pc,
                                                      const double* coef, const double* scale, const double* zp, float* out,
                                                      size_t ldo) {
        __m256i acc[R][T][kPieces] = {};
        for (size_t i = 0; i < kp; i += kStep) {
            _mm_prefetch(reinterpret_cast<const char*>(w + i * km) + kPrefetch, _MM_HINT_T0);  // a group's line
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
                const int64_t sums[kPieces] = {lane_sum(acc[r][t][0]), lane_sum(acc[r][t][1])};
                out[t * ldo + r] = combine<kPieces>(sums, coef + t * (kPieces + 1), zp[r], scale[r]);
            }
    }
};

// AVX-512 VNNI's vpdpbusd on 256-bit vectors (the VL encoding, 32 registers): measured on a Sapphire Rapids, 0.8B
// sizes, 1 thread, its 512-bit form streamed 10.7 GB/s, this one 13.5, AVX2's kernel 12.4 (the wide multiply-adds
// slow the core). Two streams a block — the first and the second half of its columns, read side by side — keep more
// lines in flight than one.
struct Vnni {
    using Piece = int8_t;
    static constexpr int kPieces = 4, kStep = 32;
    static constexpr double kBound = 127.0;
    static constexpr int64_t kMaxColumns = 65536;  // as the JIT kernel's: four products ≤ 255·127 a lane per 32 columns
    // Measured on a Sapphire Rapids, 1 thread, the 0.8B step's projections (752 MB): two streams 2 KiB ahead 55.3–55.6
    // ms; one stream 58.7–59.9, four 60.2; 3 KiB ahead 59.9–60.7, 4 KiB 64.7–67.2, four streams 1 KiB ahead 62.7–63.3.
    // (A 64 MiB matrix alone: 2 KiB 13.3–13.6 GB/s, 1 KiB 12.7–12.9, 512 B 11.2–11.8, into L2 (T1) 12.0–12.5.)
    static constexpr size_t kPrefetch = 2048;
    static constexpr int kStreams = 2;

    template <int R, int T>
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static inline void step(
        const uint8_t* w, size_t rs, size_t km, size_t kp, size_t i, const Piece* pc, __m256i (&acc)[R][T][kPieces]) {
        _mm_prefetch(reinterpret_cast<const char*>(w + i * km) + kPrefetch, _MM_HINT_T0);
        if (R * kStep > 64) _mm_prefetch(reinterpret_cast<const char*>(w + i * km) + kPrefetch + 64, _MM_HINT_T0);
        __m256i wv[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) wv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * rs + i * km));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
            for (int p = 0; p < kPieces; ++p) {
                const __m256i pv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pc + (t * kPieces + p) * kp + i));
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) acc[r][t][p] = _mm256_dpbusd_epi32(acc[r][t][p], wv[r], pv);
            }
    }

    template <int R, int T>
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void block(
        const uint8_t* w, size_t rs, size_t km, size_t kp, const Piece* pc, const double* coef, const double* scale,
        const double* zp, float* out, size_t ldo) {
        __m256i acc[R][T][kPieces] = {};
        const size_t part = kp / (kStreams * kStep) * kStep;  // columns of each stream; the vectors left, at the end
        for (size_t i = 0; i < part; i += kStep)
#pragma GCC unroll 4
            for (int s = 0; s < kStreams; ++s) step<R, T>(w, rs, km, kp, s * part + i, pc, acc);
        for (size_t i = kStreams * part; i < kp; i += kStep) step<R, T>(w, rs, km, kp, i, pc, acc);
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) {
                int64_t sums[kPieces];
                for (int p = 0; p < kPieces; ++p) sums[p] = Avx2::lane_sum(acc[r][t][p]);
                out[t * ldo + r] = combine<kPieces>(sums, coef + t * (kPieces + 1), zp[r], scale[r]);
            }
    }
};

// Rows n0 ≤ n < n1, row n's outputs at out + n − first: a block where n is a multiple of the block and a whole block
// fits, else one row.
template <class Isa, int T>
void rows(const uint8_t* w, size_t ldw, size_t kp, const void* pieces, const double* coef, const double* scale,
          const double* zp, float* out, size_t ldo, size_t n0, size_t n1, size_t npacked, size_t first) {
    constexpr int R = T == 1 ? 4 : (T == 2 ? 2 : 1);
    const auto* pc = static_cast<const typename Isa::Piece*>(pieces);
    size_t n = n0;
    while (n < n1) {
        const bool packed = n < npacked;
        const size_t rs = packed ? Isa::kStep : ldw, km = packed ? kPack : 1;
        const uint8_t* wp = packed ? w + (n & ~size_t(kPack - 1)) * ldw + (n & (kPack - 1)) * Isa::kStep : w + n * ldw;
        if (n + R <= n1 && n % R == 0) {
            Isa::template block<R, T>(wp, rs, km, kp, pc, coef, scale + n, zp + n, out + (n - first), ldo);
            n += R;
        } else {
            Isa::template block<1, T>(wp, rs, km, kp, pc, coef, scale + n, zp + n, out + (n - first), ldo);
            n += 1;
        }
    }
}

using RowsFn = void (*)(const uint8_t*, size_t, size_t, const void*, const double*, const double*, const double*,
                        float*, size_t, size_t, size_t, size_t, size_t);
using SplitFn = void (*)(const float*, size_t, size_t, size_t, void*, double*);

struct Kernels {
    const char* name;
    int pieces, step, piece_bytes;
    int64_t max_columns;
    bool (*runs_here)();
    SplitFn split;
    RowsFn rows[kMaxTokens];
};

template <class Isa>
void split_for(const float* x, size_t tokens, size_t k, size_t kp, void* pieces, double* coef) {
    split<typename Isa::Piece, Isa::kPieces>(x, tokens, k, kp, Isa::kBound, static_cast<typename Isa::Piece*>(pieces), coef);
}

template <class Isa>
constexpr Kernels kernels(const char* name, bool (*runs_here)()) {
    return {name, Isa::kPieces, Isa::kStep, int(sizeof(typename Isa::Piece)), Isa::kMaxColumns, runs_here, split_for<Isa>,
            {rows<Isa, 1>, rows<Isa, 2>, rows<Isa, 3>, rows<Isa, 4>, rows<Isa, 5>, rows<Isa, 6>, rows<Isa, 7>, rows<Isa, 8>}};
}

bool has_avx2() { return __builtin_cpu_supports("avx2"); }
bool has_vnni() {
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}

// The `isa` attribute's values (engine/kernels/native_op.py ISAS).
const Kernels kKernels[] = {kernels<Avx2>("avx2", has_avx2), kernels<Vnni>("avx512_vnni", has_vnni)};

const Kernels* find(const std::string& name) {
    for (const Kernels& k : kKernels)
        if (name == k.name) return &k;
    return nullptr;
}

}  // namespace

namespace decider {

// One operation for every projection of the same activations (q, k, v, z, a, b of a layer; gate and up): their
// weights one matrix, the activations split once, one call; output i holds the `rows`[i] rows after those before it
// (one output of all the rows where `rows` is empty).
class Int8Projection : public ov::op::Op {
public:
    OPENVINO_OP("DeciderInt8Projection", "decider");

    Int8Projection() = default;
    explicit Int8Projection(const ov::OutputVector& args) : Op(args) { constructor_validate_and_infer_types(); }

    void validate_and_infer_types() override {
        const Kernels* kernels = find(m_isa);
        OPENVINO_ASSERT(kernels, "unknown isa '", m_isa, "' (avx2 or avx512_vnni)");
        OPENVINO_ASSERT(kernels->runs_here(), "this CPU does not run the ", m_isa, " kernel");
        const auto x = get_input_partial_shape(0);
        const auto w = get_input_partial_shape(1);
        OPENVINO_ASSERT(x.rank().is_static() && x.rank().get_length() == 3, "x must be [B, T, K]");
        OPENVINO_ASSERT(w.rank().is_static() && w.rank().get_length() == 2, "w must be [N, Kp]");
        if (x[2].is_static() && w[1].is_static()) {
            const int64_t k = x[2].get_length(), kp = w[1].get_length(), step = kernels->step;
            OPENVINO_ASSERT(kp == (k + step - 1) / step * step, "w's columns must be x's padded to ", step);
            OPENVINO_ASSERT(kp <= kernels->max_columns, "more columns than int32 lanes sum exactly");
        }
        if (m_rows.empty()) {
            set_output_type(0, ov::element::f32, ov::PartialShape{x[0], x[1], w[0]});
            return;
        }
        int64_t total = 0;
        for (size_t i = 0; i < m_rows.size(); ++i) {
            OPENVINO_ASSERT(m_rows[i] > 0, "every output needs rows");
            total += m_rows[i];
            set_output_type(i, ov::element::f32, ov::PartialShape{x[0], x[1], m_rows[i]});
        }
        OPENVINO_ASSERT(w[0].is_dynamic() || w[0].get_length() == total, "the outputs' rows must add up to w's");
    }

    std::shared_ptr<ov::Node> clone_with_new_inputs(const ov::OutputVector& args) const override {
        auto copy = std::make_shared<Int8Projection>();
        copy->m_isa = m_isa;
        copy->m_rows = m_rows;
        copy->set_arguments(args);
        copy->set_output_size(m_rows.empty() ? 1 : m_rows.size());
        copy->constructor_validate_and_infer_types();
        return copy;
    }

    bool visit_attributes(ov::AttributeVisitor& visitor) override {
        visitor.on_attribute("isa", m_isa);
        visitor.on_attribute("rows", m_rows);
        if (!m_rows.empty()) set_output_size(m_rows.size());
        return true;
    }
    bool has_evaluate() const override { return true; }

    bool evaluate(ov::TensorVector& outputs, const ov::TensorVector& inputs) const override {
        const Kernels& kernels = *find(m_isa);
        const ov::Shape xs = inputs[0].get_shape();
        const ov::Shape ws = inputs[1].get_shape();
        const size_t batch = xs[0], tokens = xs[1], k = xs[2], n = ws[0], kp = ws[1];
        // the outputs' first rows and row counts
        std::vector<size_t> first(outputs.size()), count(outputs.size());
        for (size_t i = 0, at = 0; i < outputs.size(); ++i) {
            count[i] = m_rows.empty() ? n : size_t(m_rows[i]);
            first[i] = at;
            at += count[i];
            outputs[i].set_shape({batch, tokens, count[i]});
        }
        const size_t total = batch * tokens;
        if (total == 0 || n == 0) return true;
        const float* x = inputs[0].data<const float>();
        const uint8_t* w = inputs[1].data<const uint8_t>();
        const double* scale = reinterpret_cast<const double*>(inputs[2].data<const uint8_t>());
        const double* zp = reinterpret_cast<const double*>(inputs[3].data<const uint8_t>());
        const size_t npacked = n / kPack * kPack;
        thread_local std::vector<uint8_t> pieces;
        thread_local std::vector<double> coef;
        pieces.resize(size_t(kMaxTokens) * kernels.pieces * kernels.piece_bytes * kp);
        coef.resize(kMaxTokens * (kernels.pieces + 1));
        const int threads = n * kp >= kMinSplitBytes ? parallel_get_max_threads() : 1;
        for (size_t start = 0; start < total; start += kMaxTokens) {
            const size_t t = std::min<size_t>(kMaxTokens, total - start);
            kernels.split(x + start * k, t, k, kp, pieces.data(), coef.data());
            const RowsFn fn = kernels.rows[t - 1];
            const void* pc = pieces.data();
            const double* cf = coef.data();
            // this thread's share of every output's rows: equal shares, cut at whole groups of 4 rows
            auto share = [&](const int ithr, const int nthr) {
                for (size_t i = 0; i < outputs.size(); ++i) {
                    const size_t a = first[i], e = a + count[i];
                    const size_t lo = ithr == 0 ? a : std::min(e, (a + count[i] * ithr / nthr + kPack - 1) / kPack * kPack);
                    const size_t hi = ithr + 1 == nthr ? e : std::min(e, (a + count[i] * (ithr + 1) / nthr + kPack - 1) / kPack * kPack);
                    float* o = outputs[i].data<float>() + start * count[i];
                    if (lo < hi) fn(w, kp, kp, pc, cf, scale, zp, o, count[i], lo, hi, npacked, a);
                }
            };
            if (threads <= 1)
                share(0, 1);
            else
                ov::parallel_nt_static(threads, share);
        }
        return true;
    }

private:
    std::string m_isa = "avx2";  // a graph without the attribute: the kernel every build had before
    std::vector<int64_t> m_rows;
};

}  // namespace decider

OPENVINO_CREATE_EXTENSIONS(std::vector<ov::Extension::Ptr>({std::make_shared<ov::OpExtension<decider::Int8Projection>>(),
                                                             std::make_shared<ov::OpExtension<decider::DeltaNetStep>>(),
                                                             std::make_shared<ov::OpExtension<decider::ConvShiftStep>>()}));
