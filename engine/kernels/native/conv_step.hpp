// Decider's one-token DeltaNet conv window (shift and depthwise conv) as a native OpenVINO operation (see
// engine/kernels/native_deltanet.py); registered with the int8 projection by int8_projection.cpp's extension list.
#pragma once

#include <cstdint>

#include <openvino/op/op.hpp>

namespace decider {

// One token through a DeltaNet layer's causal conv (engine/graphs/conv_step.py's shift, fused): per channel c,
//   S'[c] = (S[c, 1], …, S[c, K−1], x[c]),  y[c] = Σ_j w[c, j]·S'[c, j]   (j in order, f32 products and sums)
// The plugin runs that as a Concat, a Gather with C·K constant indices, a depthwise GroupConvolution and the layouts'
// Reorders around it: ~100 µs a layer for 96 KiB (0.8B). Here one pass over the window. The SiLU after it stays the
// plugin's node. Inputs: S [b, C·K] (the window state, flattened), x [b, C] (the token), w [C, 1, 1, K]; outputs
// S' [b, C·K] and y [b, C, 1] (b: the step's rows, none or one).
class ConvShiftStep : public ov::op::Op {
public:
    OPENVINO_OP("DeciderConvShiftStep", "decider");

    ConvShiftStep() = default;
    explicit ConvShiftStep(const ov::OutputVector& args) : Op(args) { constructor_validate_and_infer_types(); }

    void validate_and_infer_types() override {
        const auto s = get_input_partial_shape(0), x = get_input_partial_shape(1), w = get_input_partial_shape(2);
        OPENVINO_ASSERT(s.rank().is_static() && s.rank().get_length() == 2, "the window state must be [b, C·K]");
        OPENVINO_ASSERT(x.rank().is_static() && x.rank().get_length() == 2, "the token must be [b, C]");
        OPENVINO_ASSERT(w.rank().is_static() && w.rank().get_length() == 4, "the weights must be [C, 1, 1, K]");
        for (size_t i = 0; i < 3; ++i) OPENVINO_ASSERT(get_input_element_type(i) == ov::element::f32, "f32 inputs only");
        set_output_type(0, ov::element::f32, ov::PartialShape{x[0], s[1]});
        set_output_type(1, ov::element::f32, ov::PartialShape{x[0], x[1], 1});
    }

    std::shared_ptr<ov::Node> clone_with_new_inputs(const ov::OutputVector& args) const override {
        return std::make_shared<ConvShiftStep>(args);
    }

    bool visit_attributes(ov::AttributeVisitor&) override { return true; }
    bool has_evaluate() const override { return true; }

    bool evaluate(ov::TensorVector& outputs, const ov::TensorVector& inputs) const override {
        const ov::Shape xs = inputs[1].get_shape(), ws = inputs[2].get_shape();
        const size_t rows = xs[0], channels = xs[1], kernel = ws[3];
        OPENVINO_ASSERT(ws[0] == channels && inputs[0].get_shape()[1] == channels * kernel, "window and token disagree");
        outputs[0].set_shape({rows, channels * kernel});
        outputs[1].set_shape({rows, channels, 1});
        if (rows == 0) return true;
        OPENVINO_ASSERT(rows == 1 && inputs[0].get_shape()[0] == 1, "one sequence at a time");
        const float* s = inputs[0].data<const float>();
        const float* x = inputs[1].data<const float>();
        const float* w = inputs[2].data<const float>();
        float* next = outputs[0].data<float>();
        float* y = outputs[1].data<float>();
        if (kernel == 4)  // every Qwen3.5: the window's loops unrolled (shift is inlined with K known)
            shift(s, x, w, channels, 4, next, y);
        else
            shift(s, x, w, channels, kernel, next, y);
        return true;
    }

private:
    // The window kept in registers and the pointers declared apart, so the compiler neither reloads what it stored
    // nor orders the channels one after another (a plain loop ran 10 ns a channel, 60 µs a 0.8B layer).
    __attribute__((always_inline)) static inline void shift(const float* __restrict s, const float* __restrict x,
                                                            const float* __restrict w, size_t channels, size_t kernel,
                                                            float* __restrict next, float* __restrict y) {
        for (size_t c = 0; c < channels; ++c) {
            const float* from = s + c * kernel;
            const float* wc = w + c * kernel;
            float* to = next + c * kernel;
            float sum = 0.0f;
            for (size_t j = 0; j < kernel; ++j) {
                const float value = j + 1 < kernel ? from[j + 1] : x[c];
                to[j] = value;
                sum += wc[j] * value;
            }
            y[c] = sum;
        }
    }
};

}  // namespace decider
