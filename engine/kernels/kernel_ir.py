"""LLVM IR for the integer-exact int8 projection: activations split into signed 8- or 16-bit pieces, integer dot
products with the u8 weights (exact), combined in double.

For activations x (f32, one row per token) and weight rows w (u8) with a zero point zp and a scale per row:

    x ≈ x̂ = s1·p1 + … + sP·pP    |p_i| ≤ b, s1 = max|x|/b, s_{i+1} = s_i/2b
    y[n] = scale[n] · (Σ_i s_i·⟨w_n, p_i⟩ − zp[n]·Σx̂)

Each ⟨w, p⟩ is exact: int32 lanes (`Isa.max_columns` keeps every lane below 2³¹) summed in int64, so y is the exact
dot product of the dequantised row with x̂, rounded once to f32. Two instruction sets (`Isa`):
  VNNI  `vpdpbusd`: four u8×s8 products summed into each int32 lane. b = 127: four pieces keep x to max|x|·2⁻³¹.
  AVX2  no integer dot product of bytes that is exact (`vpmaddubsw` sums u8×s8 pairs in 16 bits, saturating at
        32,767 with full-range weights), so the weights are widened to 16 bits (`vpmovzxbw`, one instruction per 16)
        and multiplied by 16-bit pieces with `vpmaddwd` (two products a lane, exact). b = 4096: two pieces keep x to
        max|x|·2⁻²⁶, and a lane's sum stays below 2³¹ up to 16,448 columns (`max_columns`).
x̂ keeps an f32 mantissa's bits on the elements near the largest, and its error elsewhere (relative to max|x|) sits
below an f32 dot product's own rounding: measured against float64 on activations spanning e^±6, the products are off
by 2e-8 – 5e-8 (VNNI) and 2e-8 – 1.1e-7 (AVX2), an f32 sum by 1e-7 – 7e-7. The weights stream once per call for
every token of the call; the pieces cost nothing where memory is the limit (one token) and arithmetic where it is not
(several tokens).

`module_ir(isa)` returns one module with:
  split(x f32[T,K], T, K, Kp, pieces i8|i16[T,P,Kp], coef f64[T,P+1])   pieces, then (s1 … sP, Σx̂) per token
  rows_t{T}(w u8[N,ldw], ldw, Kp, pieces, coef, scale f64[N], zp f64[N], out f32[T,ldo], ldo, n0, n1, npacked,
            vector bytes)                                           rows n0 ≤ n < n1, for T = 1 … MAX_TOKENS
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_TOKENS = 8
PACK = 4  # rows interleaved per group in the packed layout (every block size divides it)
PREFETCH_BLOCKS = 0  # software prefetch of the rows ahead: off (the hardware's streams measured no slower)


@dataclass(frozen=True)
class Isa:
    """How a vector of u8 weights meets a vector of pieces, and what that asks of the pieces."""

    name: str  # as the label gives it
    dot: str  # "vpdpbusd" (u8 × s8, four products a lane) or "vpmaddwd" (u8 widened to 16 bits × s16, two a lane)
    width: int  # bits of the int32 accumulators' vectors
    bound: int  # |piece| ≤ bound
    pieces: int
    # weight rows per block by tokens: rows × tokens × pieces accumulators within the vector registers (32 with
    # AVX-512, 16 with AVX2), with room for the loads
    rows_per_block: tuple[int, ...]  # index: tokens − 1
    needs: tuple[tuple[str, ...], ...]  # LLVM's names of the CPU features it runs on: any one of these sets
    max_columns: int  # every int32 lane stays below 2³¹ up to this inner dimension

    @property
    def vnni(self) -> bool:
        return self.dot == "vpdpbusd"

    @property
    def piece_type(self) -> str:
        return "i8" if self.vnni else "i16"

    @property
    def step(self) -> int:
        """Weights (bytes) per iteration and accumulator: one vector of bytes, or half of one widened to 16 bits."""
        return self.width // 8 if self.vnni else self.width // 16

    @property
    def bits(self) -> int:
        """x̂ is x to within max|x|·2^-bits: half the last piece's scale, max|x| / (b·(2b)^(P−1)) / 2."""
        return math.floor(math.log2(self.bound * (2 * self.bound) ** (self.pieces - 1))) + 1

    @property
    def description(self) -> str:
        return f"few-token int8 projections: {self.name} kernel, {self.bits}-bit activations, int32 dot products"


_VNNI_BLOCKS = (4, 2, 1, 1, 1, 1, 1, 1)
# four u8×s8 products ≤ 255·127 a lane per K/64 (512) or K/32 (256) iterations: 2³¹ is far off at 65,536
VNNI_512 = Isa("AVX-512 VNNI", "vpdpbusd", 512, 127, 4, _VNNI_BLOCKS, (("avx512vnni", "avx512bw"),), 65536)
VNNI_256 = Isa("AVX-VNNI", "vpdpbusd", 256, 127, 4, _VNNI_BLOCKS, (("avxvnni",), ("avx512vnni", "avx512vl")), 65536)
# two products ≤ 255·4096 a lane per K/16 iterations: K·130,560 < 2³¹ up to K = 16,448
AVX2 = Isa("AVX2", "vpmaddwd", 256, 4096, 2, (4, 2, 1, 1, 1, 1, 1, 1), (("avx2",),), 16384)
ISAS = (VNNI_512, VNNI_256, AVX2)  # the fastest first


def _vectors(isa: Isa) -> tuple[str, str]:
    """The types weights and pieces are loaded as."""
    if isa.vnni:
        v = f"<{isa.width // 32} x i32>"  # bytes, four to an int32 lane as vpdpbusd takes them
        return v, v
    return f"<{isa.step} x i8>", f"<{isa.step} x i16>"


def _dot(isa: Isa, acc: str, w: str, p: str) -> list[str]:
    """{acc}n = acc + the products of the weights w and the piece p, summed per int32 lane."""
    v = f"<{isa.width // 32} x i32>"
    if isa.vnni:
        return [f"  {acc}n = call {v} @llvm.x86.avx512.vpdpbusd.{isa.width}({v} {acc}, {v} {w}, {v} {p})"]
    h = f"<{isa.step} x i16>"
    return [f"  {acc}x = call {v} @llvm.x86.avx2.pmadd.wd({h} {w}, {h} {p})", f"  {acc}n = add {v} {acc}, {acc}x"]


def _block(rows: int, tokens: int, isa: Isa) -> str:
    """One block of `rows` weight rows against `tokens` tokens: each weight vector loaded once, every piece of
    every token multiplied into its own accumulator; then reduced, scaled, stored."""
    lanes, step, pieces, pt = isa.width // 32, isa.step, isa.pieces, isa.piece_type
    v, (wload, pload) = f"<{lanes} x i32>", _vectors(isa)
    accs = [(r, t, p) for r in range(rows) for t in range(tokens) for p in range(pieces)]

    def a(r: int, t: int, p: int) -> str:
        return f"%a{r}_{t}_{p}"

    out = [
        f"define internal void @block_r{rows}_t{tokens}(i8* %w, i64 %rs, i64 %km, i64 %kp, i8* %pc, double* %coef, "
        f"double* %scale, double* %zp, float* %out, i64 %ldo) alwaysinline nounwind {{",
        "entry:", f"  %pe = bitcast i8* %pc to {pt}*", "  br label %loop", "loop:",
        "  %i = phi i64 [0, %entry], [%inext, %loop]",
    ]
    out += [f"  {a(*x)} = phi {v} [zeroinitializer, %entry], [{a(*x)}n, %loop]" for x in accs]
    for r in range(rows):
        out += [f"  %wr{r} = mul i64 {r}, %rs", f"  %wk{r} = mul i64 %i, %km", f"  %wo{r} = add i64 %wr{r}, %wk{r}",
                f"  %wp{r} = getelementptr i8, i8* %w, i64 %wo{r}", f"  %wq{r} = bitcast i8* %wp{r} to {wload}*",
                f"  %w{'v' if isa.vnni else 'l'}{r} = load {wload}, {wload}* %wq{r}, align 1"]
        if not isa.vnni:  # u8 widened to 16 bits (vpmovzxbw)
            out += [f"  %wv{r} = zext {wload} %wl{r} to {pload}"]
        if PREFETCH_BLOCKS:  # the same bytes of the rows PREFETCH_BLOCKS blocks on: the next rows' stream starts early
            out += [f"  %pa{r} = mul i64 %kp, {rows * PREFETCH_BLOCKS}", f"  %pf{r} = getelementptr i8, i8* %wp{r}, i64 %pa{r}",
                    f"  call void @llvm.prefetch.p0i8(i8* %pf{r}, i32 0, i32 0, i32 1)"]
    for t in range(tokens):
        for p in range(pieces):
            s = f"{t}_{p}"
            out += [f"  %pr{s} = mul i64 {pieces * t + p}, %kp", f"  %po{s} = add i64 %pr{s}, %i",
                    f"  %pp{s} = getelementptr {pt}, {pt}* %pe, i64 %po{s}", f"  %pq{s} = bitcast {pt}* %pp{s} to {pload}*",
                    f"  %pv{s} = load {pload}, {pload}* %pq{s}, align 1"]
    for r, t, p in accs:
        out += _dot(isa, a(r, t, p), f"%wv{r}", f"%pv{t}_{p}")
    out += [f"  %inext = add i64 %i, {step}", "  %more = icmp ult i64 %inext, %kp",
            "  br i1 %more, label %loop, label %done", "done:"]
    for r, t, p in accs:
        # the lanes summed in int64: each lane holds below 2³¹, their sum need not (AVX2: 255·4096 a product)
        out += [f"  {a(r, t, p)}e = sext {v} {a(r, t, p)}n to <{lanes} x i64>",
                f"  {a(r, t, p)}s = call i64 @llvm.vector.reduce.add.v{lanes}i64(<{lanes} x i64> {a(r, t, p)}e)",
                f"  {a(r, t, p)}d = sitofp i64 {a(r, t, p)}s to double"]
    for r in range(rows):
        out += [f"  %scp{r} = getelementptr double, double* %scale, i64 {r}", f"  %sc{r} = load double, double* %scp{r}",
                f"  %zpp{r} = getelementptr double, double* %zp, i64 {r}", f"  %zp{r} = load double, double* %zpp{r}"]
    for t in range(tokens):
        out += [f"  %cp{t}_{j} = getelementptr double, double* %coef, i64 {(pieces + 1) * t + j}\n"
                f"  %c{t}_{j} = load double, double* %cp{t}_{j}" for j in range(pieces + 1)]
    for r in range(rows):
        for t in range(tokens):
            q = f"{r}_{t}"
            out += [f"  %m{p}_{q} = fmul double %c{t}_{p}, {a(r, t, p)}d" for p in range(pieces)]
            # the pieces' shares summed smallest first, less the zero point's share, times the scale
            out += [f"  %s{pieces - 1}_{q} = fadd double %m{pieces - 1}_{q}, 0.0"]
            out += [f"  %s{p}_{q} = fadd double %m{p}_{q}, %s{p + 1}_{q}" for p in reversed(range(pieces - 1))]
            out += [f"  %z_{q} = fmul double %zp{r}, %c{t}_{pieces}", f"  %d_{q} = fsub double %s0_{q}, %z_{q}",
                    f"  %y_{q} = fmul double %d_{q}, %sc{r}",
                    f"  %f_{q} = fptrunc double %y_{q} to float", f"  %or_{q} = mul i64 {t}, %ldo",
                    f"  %oo_{q} = add i64 %or_{q}, {r}", f"  %op_{q} = getelementptr float, float* %out, i64 %oo_{q}",
                    f"  store float %f_{q}, float* %op_{q}"]
    out += ["  ret void", "}"]
    return "\n".join(out)


def _rows(tokens: int, isa: Isa) -> str:
    """Rows n0 ≤ n < n1 in blocks, the remainder one row at a time. Rows below `npacked` are stored in groups of
    PACK rows interleaved by vector ([K/vector][PACK][vector] per group: a block reads one forward stream); the rows
    from `npacked` on are plain."""
    rows = isa.rows_per_block[tokens - 1]
    args = "i8* %w, i64 %ldw, i64 %kp, i8* %pc, double* %coef, double* %scale, double* %zp, float* %out, i64 %ldo"

    def call(block: int, n: str, tag: str) -> list[str]:
        return [f"  %{tag}in = icmp ult i64 {n}, %np", f"  %{tag}g = and i64 {n}, {-PACK}",
                f"  %{tag}s = and i64 {n}, {PACK - 1}", f"  %{tag}go = mul i64 %{tag}g, %ldw",
                f"  %{tag}so = mul i64 %{tag}s, %vb", f"  %{tag}po = add i64 %{tag}go, %{tag}so",
                f"  %{tag}uo = mul i64 {n}, %ldw", f"  %{tag}wo = select i1 %{tag}in, i64 %{tag}po, i64 %{tag}uo",
                f"  %{tag}rs = select i1 %{tag}in, i64 %vb, i64 %ldw", f"  %{tag}km = select i1 %{tag}in, i64 {PACK}, i64 1",
                f"  %{tag}wp = getelementptr i8, i8* %w, i64 %{tag}wo",
                f"  %{tag}sp = getelementptr double, double* %scale, i64 {n}",
                f"  %{tag}zp = getelementptr double, double* %zp, i64 {n}",
                f"  %{tag}op = getelementptr float, float* %out, i64 {n}",
                f"  call void @block_r{block}_t{tokens}(i8* %{tag}wp, i64 %{tag}rs, i64 %{tag}km, i64 %kp, i8* %pc, "
                f"double* %coef, double* %{tag}sp, double* %{tag}zp, float* %{tag}op, i64 %ldo)"]

    # one loop: a block where n is a multiple of the block size and a whole block fits (a packed block never
    # straddles two groups), else one row
    return "\n".join([
        f"define void @rows_t{tokens}({args}, i64 %n0, i64 %n1, i64 %np, i64 %vb) nounwind {{",
        "entry:", "  br label %head",
        "head:", "  %n = phi i64 [%n0, %entry], [%nb, %body], [%nt, %tbody]", "  %more = icmp ult i64 %n, %n1",
        "  br i1 %more, label %choose, label %done",
        "choose:", f"  %e = add i64 %n, {rows}", "  %fits = icmp ule i64 %e, %n1", f"  %off = and i64 %n, {rows - 1}",
        "  %aligned = icmp eq i64 %off, 0", "  %ok = and i1 %fits, %aligned", "  br i1 %ok, label %body, label %tbody",
        "body:", *call(rows, "%n", "b"), f"  %nb = add i64 %n, {rows}", "  br label %head",
        "tbody:", *call(1, "%n", "t"), "  %nt = add i64 %n, 1", "  br label %head",
        "done:", "  ret void", "}",
    ])


def _split(isa: Isa) -> str:
    """Per token: m = max|x|, s1 = m/b (1 where m = 0), s_{i+1} = s_i/2b; each piece the rounded remainder after the
    pieces before it (clamped to ±b), padding columns zero; coef = (s1 … sP, Σx̂)."""
    count, bound, pt = isa.pieces, float(isa.bound), isa.piece_type
    piece = []
    for i in range(1, count + 1):
        before = "%xd" if i == 1 else f"%r{i - 1}"
        piece += [f"  %a{i} = fmul double {before}, %i{i}", f"  %b{i} = call double @llvm.rint.f64(double %a{i})",
                  f"  %p{i} = call double @clamp(double %b{i})", f"  %h{i} = fmul double %p{i}, %s{i}",
                  f"  %r{i} = fsub double {before}, %h{i}", f"  %c{i} = fptosi double %p{i} to {pt}"]
    hat = [f"  %u{count} = fadd double %h{count}, 0.0"]
    hat += [f"  %u{i} = fadd double %h{i}, %u{i + 1}" for i in reversed(range(1, count))]
    scales = []
    for i in range(2, count + 1):
        scales.append(f"  %s{i} = fdiv double %s{i - 1}, {2 * bound}")
    scales += [f"  %i{i} = fdiv double 1.0, %s{i}" for i in range(1, count + 1)]
    phis = [f"  %v{i} = phi {pt} [%c{i}, %piece], [0, %pad]" for i in range(1, count + 1)]
    stores = []
    for i in range(1, count + 1):
        stores += [f"  %o{i}k = mul i64 {i - 1}, %kp",
                   f"  %o{i} = add i64 %o{i}k, %base", f"  %q{i} = getelementptr {pt}, {pt}* %pe, i64 %o{i}",
                   f"  store {pt} %v{i}, {pt}* %q{i}"]
    coef = []
    for i in range(1, count + 2):
        value = f"%s{i}" if i <= count else "%sumn"
        coef += [f"  %cp{i}o = add i64 %co, {i - 1}", f"  %cp{i} = getelementptr double, double* %coef, i64 %cp{i}o",
                 f"  store double {value}, double* %cp{i}"]
    return "\n".join([
        "define void @split(float* %x, i64 %t, i64 %k, i64 %kp, i8* %pc, double* %coef) nounwind {",
        "entry:", f"  %pe = bitcast i8* %pc to {pt}*", "  br label %token",
        "token:", "  %j = phi i64 [0, %entry], [%jn, %tokdone]", "  %more = icmp ult i64 %j, %t",
        "  br i1 %more, label %maxloop, label %exit",
        "maxloop:", "  %i = phi i64 [0, %token], [%in, %maxloop]", "  %m = phi float [0.0, %token], [%mn, %maxloop]",
        "  %xo = mul i64 %j, %k", "  %xi = add i64 %xo, %i", "  %xp = getelementptr float, float* %x, i64 %xi",
        "  %xv = load float, float* %xp", "  %xa = call float @llvm.fabs.f32(float %xv)",
        "  %mn = call float @llvm.maxnum.f32(float %m, float %xa)", "  %in = add i64 %i, 1",
        "  %mc = icmp ult i64 %in, %k", "  br i1 %mc, label %maxloop, label %scales",
        "scales:", "  %md = fpext float %mn to double", "  %zero = fcmp oeq double %md, 0.0",
        f"  %s1r = fdiv double %md, {bound}", "  %s1 = select i1 %zero, double 1.0, double %s1r", *scales,
        f"  %po = mul i64 %j, {count}", "  %pr = mul i64 %po, %kp", "  br label %pieces",
        "pieces:", "  %q = phi i64 [0, %scales], [%qn, %store]", "  %sum = phi double [0.0, %scales], [%sumn, %store]",
        "  %inside = icmp ult i64 %q, %k", "  br i1 %inside, label %piece, label %pad",
        "piece:", "  %xo2 = mul i64 %j, %k", "  %xi2 = add i64 %xo2, %q", "  %xp2 = getelementptr float, float* %x, i64 %xi2",
        "  %xv2 = load float, float* %xp2", "  %xd = fpext float %xv2 to double", *piece, *hat,
        "  %sumv = fadd double %sum, %u1", "  br label %store",
        "pad:", "  br label %store",
        "store:", *phis, "  %sumn = phi double [%sumv, %piece], [%sum, %pad]", "  %base = add i64 %pr, %q", *stores,
        "  %qn = add i64 %q, 1", "  %qc = icmp ult i64 %qn, %kp", "  br i1 %qc, label %pieces, label %tokdone",
        "tokdone:", f"  %co = mul i64 %j, {count + 1}", *coef, "  %jn = add i64 %j, 1", "  br label %token",
        "exit:", "  ret void", "}",
        "define internal double @clamp(double %v) alwaysinline nounwind {",
        f"  %lo = call double @llvm.maxnum.f64(double %v, double {-bound})",
        f"  %hi = call double @llvm.minnum.f64(double %lo, double {bound})", "  ret double %hi", "}",
    ])


def module_ir(isa: Isa) -> str:
    """The whole module for one instruction set."""
    lanes = isa.width // 32
    v = f"<{lanes} x i32>"
    if isa.vnni:
        dots = [f"declare {v} @llvm.x86.avx512.vpdpbusd.{isa.width}({v}, {v}, {v})"]
    else:
        dots = [f"declare {v} @llvm.x86.avx2.pmadd.wd(<{isa.step} x i16>, <{isa.step} x i16>)"]
    head = dots + [
        f"declare i64 @llvm.vector.reduce.add.v{lanes}i64(<{lanes} x i64>)",
        "declare float @llvm.fabs.f32(float)", "declare void @llvm.prefetch.p0i8(i8*, i32, i32, i32)", "declare float @llvm.maxnum.f32(float, float)",
        "declare double @llvm.rint.f64(double)", "declare double @llvm.maxnum.f64(double, double)",
        "declare double @llvm.minnum.f64(double, double)",
    ]
    tokens = range(1, MAX_TOKENS + 1)
    blocks = sorted({(isa.rows_per_block[t - 1], t) for t in tokens} | {(1, t) for t in tokens})
    body = [_block(r, t, isa) for r, t in blocks] + [_rows(t, isa) for t in tokens]
    return "\n".join(head + body + [_split(isa)])
