"""LLVM IR for the integer-exact int8 projection: activations split into four signed 8-bit pieces, dot products
with u8 weights by VNNI (`vpdpbusd`: four u8×s8 products summed into each int32 lane, exactly), combined in double.

For activations x (f32, one row per token) and weight rows w (u8) with a zero point zp and a scale per row:

    x ≈ x̂ = s1·p1 + s2·p2 + s3·p3 + s4·p4    p_i ∈ [−127, 127], s1 = max|x|/127, s_{i+1} = s_i/254
    y[n] = scale[n] · (Σ_i s_i·⟨w_n, p_i⟩ − zp[n]·Σx̂)

Each ⟨w, p⟩ is exact in int32 (|w·p| ≤ 255·127, and K ≤ 65,536 keeps every lane below 2³¹), so y is the exact dot
product of the dequantised row with x̂, rounded once to f32. x̂ is x to within max|x|·2⁻³¹: an element 2⁷ times
smaller than the largest still keeps an f32 mantissa's 24 bits. Three pieces (max|x|·2⁻²⁴) would lose bits on every
element below the largest, and real hidden states carry outlier channels far above the rest. The weights stream once
per call for every token of the call; four pieces cost nothing where memory is the limit (one token) and a third more
arithmetic where it is not (several tokens).

`module_ir(width)` returns one module with:
  split(x f32[T,K], T, K, Kp, pieces i8[T,PIECES,Kp], coef f64[T,PIECES+1])   pieces, then (s1 … s4, Σx̂) per token
  rows_t{T}(w u8[N,ldw], ldw, Kp, pieces, coef, scale f64[N], zp f64[N], out f32[T,ldo], ldo, n0, n1, npacked,
            vector bytes)                                           rows n0 ≤ n < n1, for T = 1 … MAX_TOKENS
"""

from __future__ import annotations

MAX_TOKENS = 8
PIECES = 4
PACK = 4  # rows interleaved per group in the packed layout (every block size divides it)
PREFETCH_BLOCKS = 0  # software prefetch of the rows ahead: off (the hardware's streams measured no slower)
# Accumulators per block: rows × tokens × PIECES, within the 32 vector registers with room for the loads.
_ROWS_PER_BLOCK = {1: 4, 2: 2, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1}


def _block(rows: int, tokens: int, width: int) -> str:
    """One block of `rows` weight rows against `tokens` tokens: each weight vector loaded once, every piece of
    every token multiplied into its own accumulator; then reduced, scaled, stored."""
    lanes, step = width // 32, width // 8
    v = f"<{lanes} x i32>"
    accs = [(r, t, p) for r in range(rows) for t in range(tokens) for p in range(PIECES)]

    def a(r: int, t: int, p: int) -> str:
        return f"%a{r}_{t}_{p}"

    out = [
        f"define internal void @block_r{rows}_t{tokens}(i8* %w, i64 %rs, i64 %km, i64 %kp, i8* %pc, double* %coef, "
        f"double* %scale, double* %zp, float* %out, i64 %ldo) alwaysinline nounwind {{",
        "entry:", "  br label %loop", "loop:", "  %i = phi i64 [0, %entry], [%inext, %loop]",
    ]
    out += [f"  {a(*x)} = phi {v} [zeroinitializer, %entry], [{a(*x)}n, %loop]" for x in accs]
    for r in range(rows):
        out += [f"  %wr{r} = mul i64 {r}, %rs", f"  %wk{r} = mul i64 %i, %km", f"  %wo{r} = add i64 %wr{r}, %wk{r}",
                f"  %wp{r} = getelementptr i8, i8* %w, i64 %wo{r}", f"  %wq{r} = bitcast i8* %wp{r} to {v}*",
                f"  %wv{r} = load {v}, {v}* %wq{r}, align 1"]
        if PREFETCH_BLOCKS:  # the same bytes of the rows PREFETCH_BLOCKS blocks on: the next rows' stream starts early
            out += [f"  %pa{r} = mul i64 %kp, {rows * PREFETCH_BLOCKS}", f"  %pf{r} = getelementptr i8, i8* %wp{r}, i64 %pa{r}",
                    f"  call void @llvm.prefetch.p0i8(i8* %pf{r}, i32 0, i32 0, i32 1)"]
    for t in range(tokens):
        for p in range(PIECES):
            s = f"{t}_{p}"
            out += [f"  %pr{s} = mul i64 {PIECES * t + p}, %kp", f"  %po{s} = add i64 %pr{s}, %i",
                    f"  %pp{s} = getelementptr i8, i8* %pc, i64 %po{s}", f"  %pq{s} = bitcast i8* %pp{s} to {v}*",
                    f"  %pv{s} = load {v}, {v}* %pq{s}, align 1"]
    out += [f"  {a(r, t, p)}n = call {v} @llvm.x86.avx512.vpdpbusd.{width}({v} {a(r, t, p)}, {v} %wv{r}, {v} %pv{t}_{p})"
            for r, t, p in accs]
    out += [f"  %inext = add i64 %i, {step}", "  %more = icmp ult i64 %inext, %kp",
            "  br i1 %more, label %loop, label %done", "done:"]
    for r, t, p in accs:
        out += [f"  {a(r, t, p)}s = call i32 @llvm.vector.reduce.add.v{lanes}i32({v} {a(r, t, p)}n)",
                f"  {a(r, t, p)}d = sitofp i32 {a(r, t, p)}s to double"]
    for r in range(rows):
        out += [f"  %scp{r} = getelementptr double, double* %scale, i64 {r}", f"  %sc{r} = load double, double* %scp{r}",
                f"  %zpp{r} = getelementptr double, double* %zp, i64 {r}", f"  %zp{r} = load double, double* %zpp{r}"]
    for t in range(tokens):
        out += [f"  %cp{t}_{j} = getelementptr double, double* %coef, i64 {(PIECES + 1) * t + j}\n"
                f"  %c{t}_{j} = load double, double* %cp{t}_{j}" for j in range(PIECES + 1)]
    for r in range(rows):
        for t in range(tokens):
            q = f"{r}_{t}"
            out += [f"  %m{p}_{q} = fmul double %c{t}_{p}, {a(r, t, p)}d" for p in range(PIECES)]
            # the pieces' shares summed smallest first, less the zero point's share, times the scale
            out += [f"  %s{PIECES - 1}_{q} = fadd double %m{PIECES - 1}_{q}, 0.0"]
            out += [f"  %s{p}_{q} = fadd double %m{p}_{q}, %s{p + 1}_{q}" for p in reversed(range(PIECES - 1))]
            out += [f"  %z_{q} = fmul double %zp{r}, %c{t}_{PIECES}", f"  %d_{q} = fsub double %s0_{q}, %z_{q}",
                    f"  %y_{q} = fmul double %d_{q}, %sc{r}",
                    f"  %f_{q} = fptrunc double %y_{q} to float", f"  %or_{q} = mul i64 {t}, %ldo",
                    f"  %oo_{q} = add i64 %or_{q}, {r}", f"  %op_{q} = getelementptr float, float* %out, i64 %oo_{q}",
                    f"  store float %f_{q}, float* %op_{q}"]
    out += ["  ret void", "}"]
    return "\n".join(out)


def _rows(tokens: int) -> str:
    """Rows n0 ≤ n < n1 in blocks, the remainder one row at a time. Rows below `npacked` are stored in groups of
    PACK rows interleaved by vector ([K/vector][PACK][vector] per group: a block reads one forward stream); the rows
    from `npacked` on are plain."""
    rows = _ROWS_PER_BLOCK[tokens]
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


def _split() -> str:
    """Per token: m = max|x|, s1 = m/127 (1 where m = 0), s_{i+1} = s_i/254; each piece the rounded remainder after the
    pieces before it (clamped to ±127), padding columns zero; coef = (s1 … s_PIECES, Σx̂)."""
    piece = []
    for i in range(1, PIECES + 1):
        before = "%xd" if i == 1 else f"%r{i - 1}"
        piece += [f"  %a{i} = fmul double {before}, %i{i}", f"  %b{i} = call double @llvm.rint.f64(double %a{i})",
                  f"  %p{i} = call double @clamp(double %b{i})", f"  %h{i} = fmul double %p{i}, %s{i}",
                  f"  %r{i} = fsub double {before}, %h{i}", f"  %c{i} = fptosi double %p{i} to i8"]
    hat = [f"  %u{PIECES} = fadd double %h{PIECES}, 0.0"]
    hat += [f"  %u{i} = fadd double %h{i}, %u{i + 1}" for i in reversed(range(1, PIECES))]
    scales = []
    for i in range(2, PIECES + 1):
        scales.append(f"  %s{i} = fdiv double %s{i - 1}, 254.0")
    scales += [f"  %i{i} = fdiv double 1.0, %s{i}" for i in range(1, PIECES + 1)]
    phis = [f"  %v{i} = phi i8 [%c{i}, %piece], [0, %pad]" for i in range(1, PIECES + 1)]
    stores = []
    for i in range(1, PIECES + 1):
        stores += [f"  %o{i}k = mul i64 {i - 1}, %kp",
                   f"  %o{i} = add i64 %o{i}k, %base", f"  %q{i} = getelementptr i8, i8* %pc, i64 %o{i}",
                   f"  store i8 %v{i}, i8* %q{i}"]
    coef = []
    for i in range(1, PIECES + 2):
        value = f"%s{i}" if i <= PIECES else "%sumn"
        coef += [f"  %cp{i}o = add i64 %co, {i - 1}", f"  %cp{i} = getelementptr double, double* %coef, i64 %cp{i}o",
                 f"  store double {value}, double* %cp{i}"]
    return "\n".join([
        "define void @split(float* %x, i64 %t, i64 %k, i64 %kp, i8* %pc, double* %coef) nounwind {",
        "entry:", "  br label %token",
        "token:", "  %j = phi i64 [0, %entry], [%jn, %tokdone]", "  %more = icmp ult i64 %j, %t",
        "  br i1 %more, label %maxloop, label %exit",
        "maxloop:", "  %i = phi i64 [0, %token], [%in, %maxloop]", "  %m = phi float [0.0, %token], [%mn, %maxloop]",
        "  %xo = mul i64 %j, %k", "  %xi = add i64 %xo, %i", "  %xp = getelementptr float, float* %x, i64 %xi",
        "  %xv = load float, float* %xp", "  %xa = call float @llvm.fabs.f32(float %xv)",
        "  %mn = call float @llvm.maxnum.f32(float %m, float %xa)", "  %in = add i64 %i, 1",
        "  %mc = icmp ult i64 %in, %k", "  br i1 %mc, label %maxloop, label %scales",
        "scales:", "  %md = fpext float %mn to double", "  %zero = fcmp oeq double %md, 0.0",
        "  %s1r = fdiv double %md, 127.0", "  %s1 = select i1 %zero, double 1.0, double %s1r", *scales,
        f"  %po = mul i64 %j, {PIECES}", "  %pr = mul i64 %po, %kp", "  br label %pieces",
        "pieces:", "  %q = phi i64 [0, %scales], [%qn, %store]", "  %sum = phi double [0.0, %scales], [%sumn, %store]",
        "  %inside = icmp ult i64 %q, %k", "  br i1 %inside, label %piece, label %pad",
        "piece:", "  %xo2 = mul i64 %j, %k", "  %xi2 = add i64 %xo2, %q", "  %xp2 = getelementptr float, float* %x, i64 %xi2",
        "  %xv2 = load float, float* %xp2", "  %xd = fpext float %xv2 to double", *piece, *hat,
        "  %sumv = fadd double %sum, %u1", "  br label %store",
        "pad:", "  br label %store",
        "store:", *phis, "  %sumn = phi double [%sumv, %piece], [%sum, %pad]", "  %base = add i64 %pr, %q", *stores,
        "  %qn = add i64 %q, 1", "  %qc = icmp ult i64 %qn, %kp", "  br i1 %qc, label %pieces, label %tokdone",
        "tokdone:", f"  %co = mul i64 %j, {PIECES + 1}", *coef, "  %jn = add i64 %j, 1", "  br label %token",
        "exit:", "  ret void", "}",
        "define internal double @clamp(double %v) alwaysinline nounwind {",
        "  %lo = call double @llvm.maxnum.f64(double %v, double -127.0)",
        "  %hi = call double @llvm.minnum.f64(double %lo, double 127.0)", "  ret double %hi", "}",
    ])


def module_ir(width: int) -> str:
    """The whole module for vectors of `width` bits (512: AVX-512 VNNI; 256: AVX-VNNI or AVX-512 VNNI + VL)."""
    lanes = width // 32
    head = [
        f"declare <{lanes} x i32> @llvm.x86.avx512.vpdpbusd.{width}(<{lanes} x i32>, <{lanes} x i32>, <{lanes} x i32>)",
        f"declare i32 @llvm.vector.reduce.add.v{lanes}i32(<{lanes} x i32>)",
        "declare float @llvm.fabs.f32(float)", "declare void @llvm.prefetch.p0i8(i8*, i32, i32, i32)", "declare float @llvm.maxnum.f32(float, float)",
        "declare double @llvm.rint.f64(double)", "declare double @llvm.maxnum.f64(double, double)",
        "declare double @llvm.minnum.f64(double, double)",
    ]
    blocks = sorted({(_ROWS_PER_BLOCK[t], t) for t in range(1, MAX_TOKENS + 1)} | {(1, t) for t in range(1, MAX_TOKENS + 1)})
    body = [_block(r, t, width) for r, t in blocks] + [_rows(t) for t in range(1, MAX_TOKENS + 1)]
    return "\n".join(head + body + [_split()])


def vector_bytes(width: int) -> int:
    """The inner dimension is padded to a multiple of this (zero weights and zero pieces add nothing)."""
    return width // 8
