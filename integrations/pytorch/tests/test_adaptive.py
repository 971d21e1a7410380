"""Layer-aware mode (ebac's controller) and the batch planner through ebac_torch."""

import math
import unittest

from _common import C, ebac_torch, torch
from test_hooks import Net, data

F = torch.nn.functional


def train_tokens(model, shape, steps=16, scale=1.0, shift=0.0, **kw):
    """16 SGD steps of `model` on random token batches (shape: batch, tokens, features; 10 classes per
    token) under a LayerAwareCompression with tau 0.2, window 4, observing every other step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    la = ebac_torch.LayerAwareCompression(model, target_relative_error=0.2, window=4, observe_every=2,
                                          initial_bound=1e-2, min_numel=256, **kw)
    for step in range(steps):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(*shape, generator=g) * scale + shift
        y = torch.randint(0, 10, shape[:2], generator=g)
        opt.zero_grad()
        with la:
            loss = F.cross_entropy(model(x).reshape(-1, 10), y.reshape(-1))
        loss.backward()
        la.end_iteration()
        opt.step()
    return la


class Controller(unittest.TestCase):
    def test_moves_towards_target(self):
        c = C.Controller(2, target_relative_error=0.1, window=2, initial_eb=1e-2)
        for _ in range(2):
            # layer 0: predicted error 1% of the gradient at eb 1e-2 -> may loosen;
            # layer 1: 100% -> must tighten
            self.assertTrue(c.observe(0, 1e-2, 0.01, 1.0, 8.0))
            self.assertTrue(c.observe(1, 1e-2, 1.0, 1.0, 8.0))
            updated = c.end_iteration()
        self.assertTrue(updated)
        self.assertGreater(c.bound(0), 1e-2)
        self.assertLess(c.bound(1), 1e-2)
        rep = c.report()
        self.assertEqual(rep["iteration"], 2)
        self.assertAlmostEqual(rep["layers"][0]["compression_ratio"], 8.0)
        self.assertFalse(c.observe(0, -1.0, 0.1, 1.0, 1.0))   # rejected, counted
        self.assertFalse(c.observe(5, 1e-2, 0.1, 1.0, 1.0))   # unknown layer

    def test_bad_configuration(self):
        with self.assertRaises(RuntimeError):
            C.Controller(1, target_relative_error=-1.0)
        with self.assertRaises(RuntimeError):
            C.Controller(1, window=0)


class Planner(unittest.TestCase):
    def test_plan_from_stats(self):
        model = Net()
        x, y = data(32)
        with ebac_torch.compressed_activations(1e-2, "rel", "ratio", model=model, min_numel=1024):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        st = ebac_torch.stats()
        per_sample = sum(d["stored_bytes"] for d in st["details"]) / 32
        raw_per_sample = sum(d["raw_bytes"] for d in st["details"]) / 32
        largest = max(d["raw_bytes"] for d in st["details"]) / 32
        floor = 3.5 * largest * (1 - per_sample / raw_per_sample)
        budget = 1e6
        # Without a probe: the saved bytes plus 3.5 x the largest saved tensor x (1 - saved / raw).
        p = ebac_torch.plan_batch(budget, 32, stats=st, safety_margin=0.1, reference_lr=0.05)
        self.assertTrue(p["ok"], p)
        self.assertAlmostEqual(p["saved_bytes_per_sample"], per_sample, delta=1e-6 * per_sample)
        self.assertAlmostEqual(p["working_bytes_per_sample"], floor, delta=1e-6 * largest)
        self.assertEqual(p["max_micro_batch"], int(budget * 0.9 / (per_sample + floor)))
        self.assertIn("batch planner", p["description"])
        self.assertIn("working set", p["description"])
        # With a probe step: its rise per sample is the whole per-sample cost, static part removed.
        rise, grads = 40 * (per_sample + largest), 1000.0
        q = ebac_torch.plan_batch(budget, 32, stats=st, safety_margin=0.1, probe_rise=32 * rise / 40 + grads,
                                  static_bytes=grads, working_set_tensors=0)
        self.assertAlmostEqual(q["bytes_per_sample"], rise / 40, delta=1e-6 * rise)
        self.assertAlmostEqual(q["working_bytes_per_sample"], largest, delta=1e-6 * rise)
        self.assertEqual(q["max_micro_batch"], int((budget * 0.9 - grads) / (rise / 40)))
        # ... and the derived figure is its floor (a small probe's rise can under-count)
        f = ebac_torch.plan_batch(budget, 32, stats=st, safety_margin=0.1, probe_rise=32 * rise / 40 + grads,
                                  static_bytes=grads)
        self.assertAlmostEqual(f["working_bytes_per_sample"], floor, delta=1e-6 * rise)
        with self.assertRaises(ValueError):
            ebac_torch.plan_batch(budget, 0, stats=st)
        self.assertFalse(ebac_torch.plan_batch(budget, 32, stats=st, probe_rise=-5.0)["ok"])
        # Without compression: every saved byte raw, and no working-set floor (backward releases as much).
        raw = ebac_torch.plan_batch(budget, 32, stats=st, compressed=False)
        self.assertAlmostEqual(raw["saved_bytes_per_sample"], raw_per_sample, delta=1e-3)
        self.assertEqual(raw["working_bytes_per_sample"], 0.0)
        p0 = ebac_torch.plan_batch(budget, 32, stats=st, working_set_tensors=0)
        self.assertGreater(p0["max_micro_batch"], 2 * raw["max_micro_batch"])
        # a target batch that does not fit: gradient accumulation, lr scaled linearly
        q = ebac_torch.plan_batch(budget, 32, stats=st, target_global_batch=4 * p["max_micro_batch"] + 1,
                                  reference_lr=0.05)
        self.assertGreater(q["accumulation_steps"], 1)
        self.assertAlmostEqual(q["learning_rate"], 0.05 * q["global_batch"] / 32, places=9)
        bad = ebac_torch.plan_batch(10.0, 32, stats=st)
        self.assertFalse(bad["ok"])
        self.assertEqual(bad["state"], "batch_one_too_large")
        # Two probe steps read as a line: its slope per sample, a positive intercept static, no floor.
        slope, fixed = per_sample + 0.5 * largest, 5000.0
        two = ebac_torch.plan_batch(budget, 32, stats=st, safety_margin=0.1,
                                    probe_rise={16: 16 * slope + fixed, 32: 32 * slope + fixed})
        self.assertTrue(two["ok"], two)
        self.assertAlmostEqual(two["bytes_per_sample"], slope, delta=1e-6 * slope)
        self.assertEqual(two["max_micro_batch"], int((budget * 0.9 - fixed) / slope))
        # ... a small probe that under-counts by a fixed slack: the slope alone
        under = ebac_torch.plan_batch(budget, 32, stats=st, safety_margin=0.1,
                                      probe_rise={16: 16 * slope - fixed, 32: 32 * slope - fixed})
        self.assertEqual(under["max_micro_batch"], int(budget * 0.9 / slope))
        with self.assertRaises(ValueError):
            ebac_torch.plan_batch(budget, 32, stats=st, probe_rise={8: 1e5, 16: 2e5, 32: 4e5})
        with self.assertRaises(ValueError):
            ebac_torch.plan_batch(budget, 32, stats=st, probe_rise={0: 1e5, 16: 2e5})
        self.assertFalse(ebac_torch.plan_batch(budget, 32, stats=st, probe_rise={8: -1.0, 16: 2e5})["ok"])

    def test_recipes_cost_no_saved_bytes(self):
        # A GELU's output is stored as a recipe (derive=True): nothing is held for it until backward
        # rebuilds it, so the plan's saved bytes are the compressed and kept tensors' bytes alone.
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
        x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
        with ebac_torch.compressed_activations(1e-2, "rel", "ratio", min_numel=1024):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        st = ebac_torch.stats()
        recipes = [d for d in st["details"] if "derived" in d]
        self.assertTrue(recipes, st["details"])
        held = sum(d["stored_bytes"] for d in st["details"]) / 32  # recipes: 0 stored bytes
        p = ebac_torch.plan_batch(1e6, 32, stats=st, working_set_tensors=0)
        self.assertAlmostEqual(p["saved_bytes_per_sample"], held, delta=1e-3 * held + 1)
        raw = sum(d["raw_bytes"] for d in st["details"]) / 32
        plain = ebac_torch.plan_batch(1e6, 32, stats=st, working_set_tensors=0, compressed=False)
        self.assertAlmostEqual(plain["saved_bytes_per_sample"], raw, delta=1e-6 * raw)


class LayerAware(unittest.TestCase):
    def train(self, tau, steps=16, **kw):
        torch.manual_seed(0)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        la = ebac_torch.LayerAwareCompression(model, target_relative_error=tau, window=4, observe_every=2,
                                              initial_bound=1e-2, min_numel=256, **kw)
        losses = []
        for step in range(steps):
            x, _ = data(32, seed=step)
            y = (x.mean(dim=(1, 2, 3)) * 40).long().clamp(-4, 5) + 4
            opt.zero_grad()
            with la:
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            la.end_iteration()
            opt.step()
            losses.append(loss.item())
        return la, losses

    def test_bounds_follow_the_target(self):
        loose, l1 = self.train(0.5)
        tight, l2 = self.train(0.01)
        self.assertTrue(all(math.isfinite(v) for v in l1 + l2))
        self.assertEqual(len(loose.history), 4)
        # layers with a compressed input were observed and moved
        observed = [l for l in loose.history[-1]["layers"] if l["observations"] > 0]
        self.assertGreater(len(observed), 0)
        for name in (l["layer"] for l in observed):
            self.assertGreater(loose.bound(name), tight.bound(name), name)
        self.assertGreater(loose.stats()["ratio"], tight.stats()["ratio"])
        # the saved tensors are compressed with the controller's bounds
        conv2 = [d for d in loose.stats()["details"] if d["module"] == "conv2" and "eb" in d]
        self.assertTrue(conv2)
        self.assertAlmostEqual(conv2[0]["eb"], loose.bound("conv2"))
        plan = loose.plan_batch(1e6, 32)
        self.assertTrue(plan["ok"], plan)

    def test_batchnorm_input_shares_the_budget(self):
        la, losses = self.train(0.2, propagated_share=0.36)
        self.assertTrue(all(math.isfinite(v) for v in losses))
        # bn1 reads conv1's output: it is controlled and split conv1's budget
        self.assertIn("bn1", la.bounds())
        last = {l["layer"]: l for l in la.history[-1]["layers"]}
        self.assertEqual(last["bn1"]["propagates_to"], "conv1")
        self.assertAlmostEqual(last["bn1"]["target_relative_error"], 0.2 * 0.6)
        self.assertAlmostEqual(last["conv1"]["target_relative_error"], 0.2 * 0.8)
        self.assertAlmostEqual(last["conv2"]["target_relative_error"], 0.2)  # no BatchNorm after it
        self.assertGreater(last["bn1"]["observations"], 0)
        self.assertGreater(last["bn1"]["achieved_relative_error"], 0.0)
        # bn1's saved input is compressed with its own bound
        saved = [d for d in la.stats()["details"] if d["module"] == "bn1" and "eb" in d and d["raw_bytes"] > 4096]
        self.assertTrue(saved)
        self.assertAlmostEqual(saved[0]["eb"], last["bn1"]["previous_eb"])  # the last pass ran before the update
        self.assertAlmostEqual(la.frozen_policy()("bn1", None), la.input_bound("bn1"))
        self.assertAlmostEqual(la.input_bound("bn1"), la.bound("bn1"))
        # share 0: BatchNorm inputs are not controlled
        plain, _ = self.train(0.2, steps=4, propagated_share=0.0)
        self.assertNotIn("bn1", plain.bounds())
        self.assertEqual(plain.frozen_policy()("bn1", None), plain.other_bound)
        with self.assertRaises(ValueError):
            ebac_torch.LayerAwareCompression(Net(), propagated_share=1.0)

    def test_gelu_input_shares_the_budget(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential()
        model.add_module("fc1", torch.nn.Linear(32, 128))
        model.add_module("act", torch.nn.GELU())
        model.add_module("fc2", torch.nn.Linear(128, 10))
        la = train_tokens(model, (32, 8, 32), propagated_share=0.36)
        # the GELU reads fc1's output: it is controlled and split fc1's budget
        self.assertIn("act", la.bounds())
        last = {l["layer"]: l for l in la.history[-1]["layers"]}
        self.assertEqual(last["act"]["propagates_to"], "fc1")
        self.assertAlmostEqual(last["act"]["target_relative_error"], 0.2 * 0.6)
        self.assertAlmostEqual(last["fc1"]["target_relative_error"], 0.2 * 0.8)
        self.assertAlmostEqual(last["fc2"]["target_relative_error"], 0.2)
        self.assertGreater(last["act"]["observations"], 0)
        self.assertGreater(last["act"]["achieved_relative_error"], 0.0)
        saved = [d for d in la.stats()["details"] if d["module"] == "act" and "eb" in d]
        self.assertTrue(saved)
        self.assertAlmostEqual(saved[0]["eb"], last["act"]["previous_eb"])
        # a GELU in its tanh form is not modelled: not a follower
        model.act = torch.nn.GELU(approximate="tanh")
        la2 = ebac_torch.LayerAwareCompression(model, propagated_share=0.36)
        self.assertNotIn("act", la2.follower_index)

    def test_layernorm_is_a_controlled_layer(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential()
        model.add_module("ln", torch.nn.LayerNorm(32))
        model.add_module("fc", torch.nn.Linear(32, 10))
        la = train_tokens(model, (32, 8, 32), shift=1.0, scale=2.0)
        self.assertIn("ln", la.bounds())
        last = {l["layer"]: l for l in la.history[-1]["layers"]}
        self.assertAlmostEqual(last["ln"]["target_relative_error"], 0.2)
        self.assertGreater(last["ln"]["observations"], 0)
        # the bound it handed out is the one the LayerNorm's input was stored with (what the observation
        # is computed from is checked against autograd in test_propagation)
        saved = [d for d in la.stats()["details"] if d["module"] == "ln" and "eb" in d]
        self.assertTrue(saved)
        self.assertAlmostEqual(saved[0]["eb"], last["ln"]["previous_eb"])
        self.assertIn("layernorm_rows", saved[0])

    def test_attention_operands_are_a_controlled_group(self):
        from test_propagation import TinyAttention
        torch.manual_seed(0)
        model = torch.nn.Sequential()
        model.add_module("attn", TinyAttention())
        model.add_module("head", torch.nn.Linear(32, 10))
        la = train_tokens(model, (16, 24, 32), propagated_share=0.36)
        self.assertIn("attn", la.bounds())
        last = {l["layer"]: l for l in la.history[-1]["layers"]}
        self.assertEqual(last["attn"]["propagates_to"], "attn.qkv")  # proj's gradient is not reached
        self.assertAlmostEqual(last["attn"]["target_relative_error"], 0.2 * 0.6)
        self.assertAlmostEqual(last["attn.qkv"]["target_relative_error"], 0.2 * 0.8)
        self.assertAlmostEqual(last["attn.proj"]["target_relative_error"], 0.2)
        self.assertGreater(last["attn"]["observations"], 0)
        self.assertGreater(last["attn"]["achieved_relative_error"], 0.0)
        # the group's bound is what the attention's own saved tensors got
        own = [d for d in la.stats()["details"] if d["module"] == "attn" and "eb" in d]
        self.assertGreaterEqual(len(own), 3)
        for d in own:
            self.assertAlmostEqual(d["eb"], last["attn"]["previous_eb"])
        # without a propagated share there are no groups
        self.assertEqual(ebac_torch.LayerAwareCompression(model, propagated_share=0).groups, [])

    def test_rejects_model_without_layers(self):
        with self.assertRaises(ValueError):
            ebac_torch.LayerAwareCompression(torch.nn.ReLU())


if __name__ == "__main__":
    unittest.main()
