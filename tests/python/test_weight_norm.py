"""weight_norm (torch.nn.utils.weight_norm and parametrizations.weight_norm) and spectral_norm (flow/nn/utils)
against torch: state_dict names, torch checkpoints loading, outputs eagerly and under flow.jit for
convolutions and linear layers over every normalized dim, the weight read outside forward, a new g
taking effect in a compiled model, and the removal of the parametrization."""
import warnings

import pytest
import torch

import flow
from conftest import assert_same, make, to_flow

LAYERS = [
    (lambda m: m.nn.Conv1d(2, 3, 3), (2, 2, 7), 0),
    (lambda m: m.nn.Linear(4, 5), (3, 4), None),
    (lambda m: m.nn.ConvTranspose1d(3, 2, 4, stride=2), (1, 3, 5), 1),
    (lambda m: m.nn.Conv2d(3, 4, 3, padding=1), (1, 3, 5, 5), 2),
]


@pytest.mark.parametrize("api", ["weight_norm", "parametrizations"])
@pytest.mark.parametrize("layer,shape,dim", LAYERS, ids=["conv1d", "linear_whole", "conv_transpose1d_dim1",
                                                          "conv2d_dim2"])
def test_weight_norm_matches_torch(api, layer, shape, dim, gen):
    tm, fm = layer(torch), layer(flow)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        if api == "weight_norm":
            torch.nn.utils.weight_norm(tm, dim=dim)
            flow.nn.utils.weight_norm(fm, dim=dim)
        else:
            torch.nn.utils.parametrizations.weight_norm(tm, dim=dim)
            flow.nn.utils.parametrizations.weight_norm(fm, dim=dim)
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(make(tuple(p.shape), torch.float32, gen))
    assert list(fm.state_dict()) == list(tm.state_dict())
    fm.load_state_dict(tm.state_dict())
    x = make(shape, torch.float32, gen)
    want = tm(x).detach()
    compiled = flow.jit(fm)
    assert_same(fm(to_flow(x)), want, atol=1e-5)
    assert_same(compiled(to_flow(x)), want, atol=1e-5)
    assert_same(fm.weight, tm.weight.detach(), atol=1e-6)
    # a new g (in place, as load_state_dict writes) reaches the compiled model
    g_name = "weight_g" if api == "weight_norm" else "parametrizations.weight.original0"
    with torch.no_grad():
        tm.state_dict()[g_name].mul_(2.0)
    fm.load_state_dict(tm.state_dict())
    assert_same(compiled(to_flow(x)), tm(x).detach(), atol=1e-5)
    if api == "weight_norm":
        torch.nn.utils.remove_weight_norm(tm)
        flow.nn.utils.remove_weight_norm(fm)
    else:
        assert flow.nn.utils.parametrize.is_parametrized(fm, "weight")
        torch.nn.utils.parametrize.remove_parametrizations(tm, "weight")
        flow.nn.utils.parametrize.remove_parametrizations(fm, "weight")
        assert not flow.nn.utils.parametrize.is_parametrized(fm)
    assert list(fm.state_dict()) == list(tm.state_dict())
    assert_same(fm(to_flow(x)), tm(x).detach(), atol=1e-5)


def test_weight_norm_errors():
    m = flow.nn.Linear(3, 2)
    with pytest.warns(FutureWarning, match="deprecated"):
        flow.nn.utils.weight_norm(m)
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            flow.nn.utils.weight_norm(m)
    with pytest.raises(ValueError, match="weight_norm of 'bias' not found"):
        flow.nn.utils.remove_weight_norm(m, "bias")
    p = flow.nn.utils.parametrizations.weight_norm(flow.nn.Linear(3, 2))
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        flow.nn.utils.parametrize.remove_parametrizations(p, "weight", leave_parametrized=False)


@pytest.mark.parametrize("layer,shape", [(lambda m: m.nn.Conv2d(2, 3, 3), (2, 2, 5, 5)),
                                         (lambda m: m.nn.ConvTranspose2d(3, 2, 3, stride=2), (1, 3, 4, 4)),
                                         (lambda m: m.nn.Linear(4, 6), (3, 4))], ids=["conv2d", "conv_transpose2d",
                                                                                      "linear"])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_spectral_norm_matches_torch(layer, shape, jit, gen):
    """spectral_norm with torch's state (weight_orig, weight_u, weight_v): eval uses u and v as they
    are; each training call runs a power-iteration step and writes u and v back, as torch's."""
    torch.manual_seed(gen.initial_seed() % 2**31)
    tm = torch.nn.utils.spectral_norm(layer(torch), n_power_iterations=2)
    fm = flow.nn.utils.spectral_norm(layer(flow), n_power_iterations=2)
    assert list(fm.state_dict()) == list(tm.state_dict())
    fm.load_state_dict(tm.state_dict())
    run = flow.jit(fm) if jit else fm
    x = make(shape, torch.float32, gen)
    for mode in ("eval", "train", "train", "eval"):
        getattr(tm, mode)()
        getattr(fm, mode)()
        assert_same(run(to_flow(x)), tm(x).detach(), atol=2e-5, rtol=1e-4, msg=mode)
        assert_same(fm.weight_u, tm.weight_u, atol=1e-6, msg=f"u after {mode}")
        assert_same(fm.weight_v, tm.weight_v, atol=1e-6, msg=f"v after {mode}")
    torch.nn.utils.remove_spectral_norm(tm)
    flow.nn.utils.remove_spectral_norm(fm)
    assert list(fm.state_dict()) == list(tm.state_dict())
    assert_same(fm(to_flow(x)), tm(x).detach(), atol=2e-5, rtol=1e-4)
