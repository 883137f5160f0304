"""MultiheadAttention, the transformer encoder and decoder layers and stacks, and Transformer, with torch's parameters
(in_proj_weight / in_proj_bias packed [3E, E], out_proj, or q/k/v_proj_weight when kdim/vdim differ),
arguments and mask conventions (a boolean attn_mask / key_padding_mask marks positions NOT to attend,
a float one is added to the scores).

The decoder (TransformerDecoderLayer: self attention, cross attention over the memory, feed-forward,
post- or pre-norm; TransformerDecoder; Transformer) follows torch's forward. The *_is_causal flags
are hints: flow always applies the given mask (torch may use a causal kernel in its place, the same
result when the hint is right), and TransformerDecoder does not inspect the mask's values to guess
the flag (that would be data-dependent under @flow.jit); tgt_is_causal=True still needs a tgt_mask.

Attention is composed from linear, matmul, softmax and views: with need_weights=False it is
F.scaled_dot_product_attention; with need_weights=True torch's explicit path (q scaled by
1/sqrt(head_dim), softmax, weights averaged over heads unless average_attn_weights=False). Self
attention (query is key is value, packed weights) runs one in-projection GEMM.
"""
import copy
import math
from collections import OrderedDict

from .. import _creation
from .. import _dtype as D
from .. import _ops
from . import functional as F
from . import init
from ._module_store import ModuleStore
from .activation import GELU, ReLU
from .layers import Dropout, LayerNorm, Linear
from .modules import Module, ModuleList, Parameter

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer"]


def _clone_module(m):
    """A deep copy of a module with fresh parameter and buffer storage (flow tensors are not
    deep-copyable through copy.deepcopy)."""
    new = copy.copy(m)
    d = new.__dict__
    # ModuleStores, as Module.__init__ makes them: flow.jit caches its walk of a tree of those.
    d["_parameters"] = ModuleStore((k, None if p is None else Parameter(p.clone(), p.requires_grad))
                                   for k, p in m._parameters.items())
    d["_buffers"] = ModuleStore((k, None if b is None else b.clone()) for k, b in m._buffers.items())
    d["_non_persistent_buffers_set"] = set(m._non_persistent_buffers_set)
    d["_modules"] = ModuleStore((k, None if c is None else _clone_module(c)) for k, c in m._modules.items())
    d["_forward_hooks"] = OrderedDict(m._forward_hooks)
    d["_forward_pre_hooks"] = OrderedDict(m._forward_pre_hooks)
    return new


def _bool_to_float_mask(mask, like):
    """torch's _canonical_mask: a boolean mask (True = masked out) as an additive float mask."""
    if mask is None:
        return None
    if mask.dtype is D.bool_:
        return _ops.where(mask, -math.inf, 0.0).to(like.dtype)
    if not mask.dtype.is_floating_point:
        raise AssertionError("only bool and floating types of masks are supported")
    return mask


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        dt = dtype or D.float32

        def empty(*shape):
            return Parameter(_creation.empty(*shape, dtype=dt, device=device))

        if not self._qkv_same_embed_dim:
            self.q_proj_weight = empty(embed_dim, embed_dim)
            self.k_proj_weight = empty(embed_dim, self.kdim)
            self.v_proj_weight = empty(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = empty(3 * embed_dim, embed_dim)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = empty(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = empty(1, 1, embed_dim)
            self.bias_v = empty(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _proj_weights(self):
        E = self.embed_dim
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            ws = [F._slice(w, 0, i * E, (i + 1) * E) for i in range(3)]
        else:
            ws = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        b = self.in_proj_bias
        bs = [None] * 3 if b is None else [F._slice(b, 0, i * E, (i + 1) * E) for i in range(3)]
        return ws, bs

    def _heads(self, x):  # [N, L, E] -> [N, H, L, Dh]
        N, L = x.shape[0], x.shape[1]
        return F._permute(F._reshape(x, [N, L, self.num_heads, self.head_dim]), [0, 2, 1, 3])

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                               "method `generate_square_subsequent_mask` to create this mask.")
        batched = query.ndim == 3
        self_attn = query is key and key is value
        if not batched:  # [L, E] -> [1, L, E]
            query, key, value = (F._unsqueeze(t, 0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = F._unsqueeze(key_padding_mask, 0)
        elif not self.batch_first:  # [L, N, E] -> [N, L, E]
            query, key, value = (F._transpose(t, 0, 1) for t in (query, key, value))
        N, L, E = query.shape
        H, Dh = self.num_heads, self.head_dim
        if key.shape[0] != N or value.shape[0] != N:
            raise RuntimeError(f"the batch sizes of key ({key.shape[0]}) and value ({value.shape[0]}) must equal "
                               f"query's ({N})")
        if E != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got {E}")

        ws, bs = self._proj_weights()
        if self_attn and self._qkv_same_embed_dim:
            qkv = F.linear(query, self.in_proj_weight, self.in_proj_bias)  # [N, L, 3E]
            qkv = F._permute(F._reshape(qkv, [N, L, 3, H, Dh]), [2, 0, 3, 1, 4])  # [3, N, H, L, Dh]
            q, k, v = (F._select(qkv, 0, i) for i in range(3))
        else:
            q = self._heads(F.linear(query, ws[0], bs[0]))
            k = self._heads(F.linear(key, ws[1], bs[1]))
            v = self._heads(F.linear(value, ws[2], bs[2]))

        mask = _bool_to_float_mask(attn_mask, q)
        if mask is not None:
            if mask.ndim == 3:  # [N * H, L, S]
                mask = F._reshape(mask, [N, H] + list(mask.shape[1:]))
            elif mask.ndim != 2:
                raise RuntimeError(f"attn_mask's dimension {mask.ndim} is not supported")
        if self.bias_k is not None:  # one more key / value position
            k = F._cat([k, F._expand(F._reshape(self.bias_k, [1, H, 1, Dh]), [N, H, 1, Dh])], 2)
            v = F._cat([v, F._expand(F._reshape(self.bias_v, [1, H, 1, Dh]), [N, H, 1, Dh])], 2)
            mask = None if mask is None else F.pad(mask, [0, 1])
            key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, [0, 1])
        if self.add_zero_attn:
            k, v = F.pad(k, [0, 0, 0, 1]), F.pad(v, [0, 0, 0, 1])
            mask = None if mask is None else F.pad(mask, [0, 1])
            key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, [0, 1])
        kpm = _bool_to_float_mask(key_padding_mask, q)
        if kpm is not None:
            S = k.shape[2]
            kpm = F._reshape(kpm, [N, 1, 1, S])
            mask = kpm if mask is None else mask + kpm

        weights = None
        if need_weights:
            scores = F.dispatch1("matmul", [q * math.sqrt(1.0 / float(Dh)), F._transpose(k, -2, -1)])
            if mask is not None:
                scores = scores + mask
            attn = F.softmax(scores, -1)
            if self.dropout > 0 and self.training:
                attn = F.dropout(attn, self.dropout, training=True)  # the returned weights are dropped too, as torch
            out = F.dispatch1("matmul", [attn, v])
            weights = _ops.mean(attn, 1) if average_attn_weights else attn
            if not batched:
                weights = F._reshape(weights, list(weights.shape[1:]))
        else:
            out = F.scaled_dot_product_attention(q, k, v, mask, dropout_p=self.dropout if self.training else 0.0)
        out = F._reshape(F._permute(out, [0, 2, 1, 3]), [N, L, E])  # [N, L, E]
        out = self.out_proj(out)
        if not batched:
            out = F._reshape(out, [L, E])
        elif not self.batch_first:
            out = F._transpose(out, 0, 1)
        return out, weights

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def _get_activation_fn(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if callable(activation):
        return activation
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class TransformerEncoderLayer(Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        self.activation = activation
        self.activation_relu_or_gelu = (1 if activation is F.relu or isinstance(activation, ReLU) else
                                        2 if activation is F.gelu or isinstance(activation, GELU) else 0)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerEncoder(Module):
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = ModuleList([_clone_module(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self.norm is not None:
            x = self.norm(x)
        return x


class TransformerDecoderLayer(Module):
    """Self attention over tgt, attention over memory and a feed-forward block, each with a residual
    and LayerNorm (after the block, or before it when norm_first)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                                 **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    _sa_block = TransformerEncoderLayer._sa_block  # self-attention then dropout1, as the encoder's

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer (fresh parameter storage each), then the optional norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([_clone_module(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal is True,
                      memory_is_causal=memory_is_causal)
        if self.norm is not None:
            x = self.norm(x)
        return x


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """[sz, sz] float mask: -inf above the diagonal, 0 elsewhere."""
    return _ops.triu(_creation.full((sz, sz), -math.inf, dtype=D.float32 if dtype is None else dtype, device=device), 1)


class Transformer(Module):
    """An encoder (TransformerEncoder with a final LayerNorm) and a decoder (TransformerDecoder with a
    final LayerNorm), or custom_encoder / custom_decoder; matrices initialized by xavier_uniform_."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*args, **kw), num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*args, **kw), num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        is_batched = src.ndim == 3
        if is_batched and src.shape[0 if self.batch_first else 1] != tgt.shape[0 if self.batch_first else 1]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A float causal mask: -inf where position i may not attend to j (j > i), else 0."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)


class _AttentionArguments:
    """The state MultiheadAttention.forward reads, from multi_head_attention_forward's arguments."""

    _proj_weights = MultiheadAttention._proj_weights
    _heads = MultiheadAttention._heads
    forward = MultiheadAttention.forward

    def __init__(self, embed_dim, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
                 out_proj_weight, out_proj_bias, training, separate, q_proj_weight, k_proj_weight, v_proj_weight):
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
        self._qkv_same_embed_dim = not separate
        self.in_proj_weight, self.in_proj_bias = in_proj_weight, in_proj_bias
        self.q_proj_weight, self.k_proj_weight, self.v_proj_weight = q_proj_weight, k_proj_weight, v_proj_weight
        self.bias_k, self.bias_v, self.add_zero_attn = bias_k, bias_v, add_zero_attn
        self.dropout, self.training, self.batch_first = dropout_p, training, False
        self.out_proj = lambda x: F.linear(x, out_proj_weight, out_proj_bias)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """torch.nn.functional.multi_head_attention_forward: MultiheadAttention's computation from its
    weights as arguments (sequence-first [L, N, E] or unbatched [L, E] inputs), returning (output,
    weights averaged over heads or per head, or None)."""
    if static_k is not None or static_v is not None:
        raise NotImplementedError("flow: multi_head_attention_forward(static_k=, static_v=) is not supported")
    if query.shape[-1] != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {query.shape[-1]}")
    if use_separate_proj_weight and (q_proj_weight is None or k_proj_weight is None or v_proj_weight is None):
        raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight "
                             "is None")
    state = _AttentionArguments(embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v,
                                add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training,
                                use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight)
    return state.forward(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights,
                         is_causal)
