"""torch.nn modules computing on vkmha: swap the class name, keep the model.

    import torch, vkmha.nn
    mha = vkmha.nn.MultiheadAttention(512, 8, batch_first=True)  # as torch's
    mha.load_state_dict(torch_mha.state_dict())                  # both ways
    out, weights = mha(x, x, x, key_padding_mask=pad)
    model = vkmha.nn.convert(model)    # every nn.MultiheadAttention inside

Inference only: vkmha computes no gradients (see MultiheadAttention)."""
import torch

from . import _layer_of, default_context, MultiheadAttention as _Forward

__all__ = ["MultiheadAttention", "convert"]


class MultiheadAttention(torch.nn.MultiheadAttention):
    """torch.nn.MultiheadAttention whose forward runs on vkmha.

    The constructor, the parameters (same names, shapes and initialisation:
    this is a subclass), state_dict / load_state_dict (both ways with
    torch.nn.MultiheadAttention), forward's arguments, outputs and shapes
    (batch_first either way, unbatched input) are PyTorch's. Extra keyword
    arguments: context (a vkmha.Context, default vkmha.default_context())
    and path ("auto", "fused", "unfused": vkmha's attention path).

    The weights are copied to the device at the first forward and again
    only when a parameter changes (in place, as load_state_dict and
    optimizers do, or replaced, as .half(), .bfloat16(), .to(dtype) do); the
    device copy keeps the parameters' dtype (float32, float16, bfloat16).
    Inputs are CPU tensors of a float dtype; float16 / bfloat16 inputs
    compute with 16-bit storage (fp32 sums) and give outputs of their dtype.

    Masks: as torch.nn.MultiheadAttention (bool: True = not allowed; float:
    added, -inf allowed). is_causal (PyTorch 2.x) is a hint that attn_mask
    is the causal mask, which must be given too (as PyTorch requires);
    vkmha then applies its causal mask (query i sees keys j <= i) instead of
    reading attn_mask. A query row that the masks leave without any key gets
    vkmha's answer (include/vkmha.h): zeros when every key is -inf, uniform
    weights when every key is masked by a bool key_padding_mask or a 2-D
    bool attn_mask; PyTorch 1.13 returns NaN there.

    Not supported, each a NotImplementedError naming the argument:
    add_bias_kv, add_zero_attn, dropout > 0 in training mode, and a forward
    that would need gradients (grad enabled and an input requiring grad, or
    training mode with parameters requiring grad): call .eval() and/or run
    under torch.no_grad() (or torch.inference_mode())."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None, *, context=None, path="auto"):
        if add_bias_kv:
            raise NotImplementedError("vkmha.nn.MultiheadAttention: add_bias_kv is not "
                                      "supported by vkmha")
        if add_zero_attn:
            raise NotImplementedError("vkmha.nn.MultiheadAttention: add_zero_attn is not "
                                      "supported by vkmha")
        if device is not None and torch.device(device).type != "cpu":
            raise NotImplementedError("vkmha.nn.MultiheadAttention: device %s: the parameters "
                                      "live on the CPU (vkmha keeps its own copy on its "
                                      "Vulkan device)" % (device,))
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias,
                         kdim=kdim, vdim=vdim, batch_first=batch_first, device=device,
                         dtype=dtype)
        self.vkmha_context = context
        self.vkmha_path = path
        self._vkmha_key = None
        self._vkmha_forward = None

    # The device copy is rebuilt from the parameters, not copied or pickled.
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_vkmha_key"] = state["_vkmha_forward"] = None
        return state

    def _vkmha(self):
        """The vkmha layer for the parameters as they are now."""
        params = [p for p in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight,
                              self.v_proj_weight, self.in_proj_bias, self.out_proj.weight,
                              self.out_proj.bias) if p is not None]
        for p in params:
            if p.device.type != "cpu":
                raise NotImplementedError("vkmha.nn.MultiheadAttention: parameters on %s: "
                                          "they must stay on the CPU" % p.device)
        key = tuple((p.data_ptr(), p._version, p.dtype, tuple(p.shape)) for p in params)
        if key != self._vkmha_key:
            ctx = self.vkmha_context if self.vkmha_context is not None else default_context()
            layer = _layer_of(self, ctx)
            self._vkmha_forward = _Forward(layer, self.num_heads, bool(self.batch_first),
                                           self.embed_dim)
            self._vkmha_key = key
        return self._vkmha_forward

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        if self.training and self.dropout > 0:
            raise NotImplementedError("vkmha.nn.MultiheadAttention: dropout=%g in training "
                                      "mode: vkmha runs inference only (call .eval())"
                                      % self.dropout)
        if torch.is_grad_enabled():
            for x, name in ((query, "query"), (key, "key"), (value, "value")):
                if isinstance(x, torch.Tensor) and x.requires_grad:
                    raise NotImplementedError(
                        "vkmha.nn.MultiheadAttention: %s requires grad: vkmha computes no "
                        "gradients (run under torch.no_grad())" % name)
            if self.training and any(p.requires_grad for p in self.parameters()):
                raise NotImplementedError(
                    "vkmha.nn.MultiheadAttention: training mode with parameters requiring "
                    "grad: vkmha computes no gradients (call .eval() or run under "
                    "torch.no_grad())")
        causal = False
        if is_causal:
            if attn_mask is None:
                raise ValueError("vkmha.nn.MultiheadAttention: is_causal needs attn_mask "
                                 "(as torch.nn.MultiheadAttention: it is a hint that "
                                 "attn_mask is the causal mask)")
            attn_mask, causal = None, True
        return self._vkmha()(query, key, value, key_padding_mask=key_padding_mask,
                             need_weights=need_weights, attn_mask=attn_mask,
                             average_attn_weights=average_attn_weights, path=self.vkmha_path,
                             causal=causal)


def convert(model, context=None, path="auto"):
    """Replaces every torch.nn.MultiheadAttention inside model (model itself
    too) by a vkmha.nn.MultiheadAttention with the same configuration,
    parameters (copied), requires_grad flags and training mode; returns the
    model (changed in place) or the new module when model is itself one.
    Raises NotImplementedError before changing anything when one of them
    uses what vkmha does not support (add_bias_kv, add_zero_attn).

    torch.nn.TransformerEncoderLayer (and TransformerEncoder) have a fused
    inference fast path that reads the attention's weights itself and
    never calls its forward: on the layers whose self_attn it replaces,
    convert turns that fast path off (activation_relu_or_gelu = 0, which
    only that fast path reads), so that the attention runs on vkmha."""
    def swap(m):
        if type(m) is not torch.nn.MultiheadAttention:
            return m
        w = m.out_proj.weight
        new = MultiheadAttention(m.embed_dim, m.num_heads, dropout=m.dropout,
                                 bias=m.in_proj_bias is not None,
                                 add_bias_kv=m.bias_k is not None,
                                 add_zero_attn=m.add_zero_attn, kdim=m.kdim, vdim=m.vdim,
                                 batch_first=m.batch_first, dtype=w.dtype, context=context,
                                 path=path)
        new.load_state_dict(m.state_dict())
        for (_, a), (_, b) in zip(m.named_parameters(), new.named_parameters()):
            b.requires_grad_(a.requires_grad)
        return new.train(m.training)

    mods = [model] + [m for m in model.modules() if m is not model]
    for m in mods:  # check first: nothing changes if one cannot be converted
        if type(m) is torch.nn.MultiheadAttention and (m.bias_k is not None or m.add_zero_attn):
            swap(m)  # raises the NotImplementedError
    if type(model) is torch.nn.MultiheadAttention:
        return swap(model)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            new = swap(child)
            if new is not child:
                setattr(parent, name, new)
                if hasattr(parent, "activation_relu_or_gelu"):
                    parent.activation_relu_or_gelu = 0
    return model
