// The autotuner: JSON and tuning records (round trip, merge, torn lines), the strategies on
// synthetic spaces with a known cost, the measurer's error handling, workload keys, and tuning a
// compiled graph in place (outputs unchanged, records honoured on the next compile and tune).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "autotune/json.h"
#include "autotune/measure.h"
#include "autotune/records.h"
#include "autotune/search_space.h"
#include "autotune/strategy.h"
#include "autotune/tuner.h"
#include "autotune/verify.h"
#include "dsl/interpreter.h"
#include "jit/compile.h"
#include "jit/library_ops.h"
#include "runtime/onednn.h"
#include "scheduler/workload_key.h"
#include "test_util.h"

using namespace flow;
using namespace flow::autotune;
using dsl::DType;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("flow_autotune_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TuningRecord make_record(const std::string& workload, const std::string& target, double best_us, int tile) {
  TuningRecord r;
  r.workload = workload;
  r.target = target;
  r.scheduler = "pointwise";
  sched::PointwiseParams p;
  p.cpu_tile = tile;
  r.params_json = p.to_json();
  r.default_params_json = sched::PointwiseParams{}.to_json();
  r.best_us = best_us;
  r.default_us = 100;
  r.kernel = "k";
  r.time = utc_now();
  return r;
}

// A 3-knob grid over PointwiseParams' CPU fields.
SearchSpace grid_space() {
  SearchSpace s;
  s.base_json = sched::PointwiseParams{}.to_json();
  s.knobs = {{"cpu_tile", {1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}},
             {"cpu_vector_width", {1, 2, 4, 8, 16, 32}},
             {"cpu_unroll", {1, 2, 3, 4, 5, 6, 7, 8}}};
  return s;
}

// Known cost with its single minimum at (8192, 8, 3): smooth in each knob, so neighbours guide.
double synthetic_cost(const sched::Params& params) {
  const auto& p = std::get<sched::PointwiseParams>(params);
  const double a = std::log2(static_cast<double>(p.cpu_tile)) - 13;
  const double b = std::log2(static_cast<double>(p.cpu_vector_width)) - 3;
  const double c = p.cpu_unroll - 3;
  return 1.0 + a * a + 2 * b * b + 0.5 * c * c;
}

#ifdef FLOW_HAS_LLVM  // helpers of the tests that compile kernels
jit::Tensor random_tensor(const dsl::Shape& shape, std::mt19937_64& rng) {
  jit::Tensor t = jit::Tensor::empty(shape, DType::Float32);
  std::uniform_real_distribution<float> dist(-3.f, 3.f);
  float* p = static_cast<float*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

// exp(x) * y + x, and a softmax of tanh(y) over rows: one pointwise and one reduction kernel.
dsl::Graph two_kernel_graph(int64_t rows, int64_t cols) {
  dsl::Graph g;
  const int x = g.add_input({{rows, cols}, DType::Float32}, "x");
  const int y = g.add_input({{rows, cols}, DType::Float32}, "y");
  const int e = g.add("exp", {x});
  g.mark_output(g.add("add", {g.add("mul", {e, y}), x}));
  g.mark_output(g.add("softmax", {g.add("tanh", {y})}, {{"dim", int64_t{-1}}}));
  return g;
}
#endif  // FLOW_HAS_LLVM

}  // namespace

TEST(Json, ParsesAndDumpsRoundTrip) {
  const std::string text = R"({"a":1,"b":[true,false,null,-2.5e3],"c":{"d":"x\"y\n\u00e9"},"e":[]})";
  const Json j = Json::parse(text);
  EXPECT_EQ(j.at("a").as_int(), 1);
  EXPECT_EQ(j.at("b").as_array().size(), 4u);
  EXPECT_DOUBLE_EQ(j.at("b").as_array()[3].as_number(), -2500.0);
  EXPECT_EQ(j.at("c").at("d").as_string(), "x\"y\n\xc3\xa9");
  EXPECT_EQ(Json::parse(j.dump()).dump(), j.dump());
  EXPECT_EQ(j.find("zz"), nullptr);
}

TEST(Json, MalformedTextThrowsJsonError) {
  for (const char* bad : {"", "{", "{\"a\":}", "[1,]", "{\"a\":1}x", "\"unterminated", "tru", "{\"a\" 1}", "01x"}) {
    EXPECT_THROW(Json::parse(bad), JsonError) << bad;
  }
  EXPECT_THROW(Json::parse("{\"a\":\"s\"}").at("a").as_int(), JsonError);
  EXPECT_THROW(Json::parse("{}").at("a"), JsonError);
}

TEST(Records, RoundTripThroughJson) {
  TuningRecord r = make_record(std::string(32, 'a'), "llvm/cpu", 12.5, 4096);
  r.candidates = 9;
  r.failed = 2;
  r.domain = "kept [4096] reduced []";
  const TuningRecord back = TuningRecord::from_json(Json::parse(r.to_json().dump()));
  EXPECT_EQ(back.workload, r.workload);
  EXPECT_EQ(back.target, r.target);
  EXPECT_EQ(back.params_json, r.params_json);
  EXPECT_EQ(sched::params_from_json(back.params_json),
            sched::Params(std::get<sched::PointwiseParams>(sched::params_from_json(r.params_json))));
  EXPECT_DOUBLE_EQ(back.best_us, 12.5);
  EXPECT_EQ(back.candidates, 9);
  EXPECT_EQ(back.failed, 2);
  EXPECT_EQ(back.domain, r.domain);
}

TEST(Records, AppendLoadMergeKeepsTheFastestPerWorkloadAndTarget) {
  const fs::path d = temp_dir("records");
  const std::string w1(32, '1'), w2(32, '2');
  TuningDatabase::append(records_file(d.string()), make_record(w1, "cpuA", 50, 4096));
  TuningDatabase::append(records_file(d.string()), make_record(w1, "cpuA", 20, 8192));  // faster: wins
  TuningDatabase::append(records_file(d.string()), make_record(w1, "cpuB", 70, 2048));  // another target
  // A second machine's file in the same directory, with a slower record and a torn last line.
  {
    std::ofstream other(d / "other-host.jsonl");
    other << make_record(w1, "cpuA", 30, 1024).to_json().dump() << "\n";
    other << make_record(w2, "cpuA", 5, 1024).to_json().dump() << "\n";
    other << "{\"format\":1,\"workload\":\"12";  // torn
  }
  LoadReport rep;
  const TuningDatabase db = TuningDatabase::load(d.string(), &rep);
  EXPECT_EQ(rep.files, 2);
  EXPECT_EQ(rep.lines, 6);
  EXPECT_EQ(rep.bad_lines, 1);
  EXPECT_EQ(db.size(), 3u);
  ASSERT_NE(db.best(w1, "cpuA"), nullptr);
  EXPECT_DOUBLE_EQ(db.best(w1, "cpuA")->best_us, 20);
  EXPECT_EQ(std::get<sched::PointwiseParams>(sched::params_from_json(db.best(w1, "cpuA")->params_json)).cpu_tile, 8192);
  EXPECT_DOUBLE_EQ(db.best(w1, "cpuB")->best_us, 70);
  EXPECT_EQ(db.best(w2, "cpuB"), nullptr);

  // Merging is order-independent.
  TuningDatabase a = TuningDatabase::load((d / "records.jsonl").string());
  const TuningDatabase b = TuningDatabase::load((d / "other-host.jsonl").string());
  TuningDatabase ab = a;
  ab.merge(b);
  TuningDatabase ba = b;
  ba.merge(a);
  ASSERT_EQ(ab.size(), ba.size());
  for (const auto& r : ab.records()) EXPECT_DOUBLE_EQ(ba.best(r.workload, r.target)->best_us, r.best_us);

  // save() writes only the winners; loading them gives the same database.
  ab.save((d / "merged" / "records.jsonl").string());
  const TuningDatabase m = TuningDatabase::load((d / "merged").string());
  EXPECT_EQ(m.size(), ab.size());
  EXPECT_DOUBLE_EQ(m.best(w1, "cpuA")->best_us, 20);
  EXPECT_EQ(TuningDatabase::load((d / "missing").string()).size(), 0u);
  fs::remove_all(d);
}

TEST(Strategy, ExhaustiveFindsTheKnownOptimumOfASmallSpace) {
  SearchSpace s;
  s.base_json = sched::PointwiseParams{}.to_json();
  s.knobs = {{"cpu_tile", {2048, 4096, 8192, 16384}}, {"cpu_vector_width", {4, 8, 16}}};
  int calls = 0;
  const CostFn cost = [&](const sched::Params& p, std::string*) -> std::optional<double> {
    ++calls;
    return synthetic_cost(p);
  };
  const SearchResult r = search(s, sched::PointwiseParams{}, cost, Strategy::Auto, {1e9, 0}, 1);
  EXPECT_EQ(r.strategy, "exhaustive");
  EXPECT_TRUE(r.exhausted);
  const auto& best = std::get<sched::PointwiseParams>(r.best);
  EXPECT_EQ(best.cpu_tile, 8192);
  EXPECT_EQ(best.cpu_vector_width, 8);
  // The start (32768, 8, 1) is off the grid: 12 grid points plus the baseline, each once.
  EXPECT_EQ(calls, 13);
  EXPECT_EQ(r.trials.size(), 13u);
  ASSERT_TRUE(r.start_cost.has_value());
  EXPECT_DOUBLE_EQ(*r.start_cost, synthetic_cost(sched::PointwiseParams{}));
}

TEST(Strategy, RandomAndEvolutionaryFindTheOptimumOfALargeSpace) {
  const SearchSpace s = grid_space();  // 384 points
  const double optimum = 1.0;
  for (Strategy st : {Strategy::Random, Strategy::Evolutionary}) {
    for (uint64_t seed : {test::rng(7)(), test::rng(8)()}) {
      const CostFn cost = [](const sched::Params& p, std::string*) -> std::optional<double> {
        return synthetic_cost(p);
      };
      // Random: enough trials to see every point. Evolutionary: far fewer than the space.
      const int cap = st == Strategy::Random ? 400 : 150;
      const SearchResult r = search(s, sched::PointwiseParams{}, cost, st, {1e9, cap}, seed);
      EXPECT_EQ(r.strategy, strategy_name(st));
      EXPECT_DOUBLE_EQ(r.best_cost, optimum)
          << strategy_name(st) << " seed " << seed << " after " << r.trials.size() << " trials";
      EXPECT_LE(static_cast<int>(r.trials.size()), cap);
    }
  }
  // Auto picks evolutionary for a space this size.
  const CostFn cost = [](const sched::Params& p, std::string*) -> std::optional<double> { return synthetic_cost(p); };
  EXPECT_EQ(search(s, sched::PointwiseParams{}, cost, Strategy::Auto, {1e9, 20}, 3).strategy, "evolutionary");
}

TEST(Strategy, FailingCandidatesAreSkippedAndReported) {
  SearchSpace s;
  s.base_json = sched::PointwiseParams{}.to_json();
  s.knobs = {{"cpu_vector_width", {1, 2, 4, 8, 16}}};
  const CostFn cost = [](const sched::Params& p, std::string* error) -> std::optional<double> {
    const int w = std::get<sched::PointwiseParams>(p).cpu_vector_width;
    if (w == 2 || w == 16) {  // the cheapest point fails: it must not win
      *error = "does not compile";
      return std::nullopt;
    }
    return 100.0 / w + w;  // 4 -> 29, 8 -> 20.5 (the default), 1 -> 101
  };
  const SearchResult r = search(s, sched::PointwiseParams{}, cost, Strategy::Exhaustive, {1e9, 0}, 0);
  EXPECT_EQ(r.failed, 2);
  EXPECT_EQ(std::get<sched::PointwiseParams>(r.best).cpu_vector_width, 8);
  int reported = 0;
  for (const Trial& t : r.trials) reported += !t.cost && t.error == "does not compile";
  EXPECT_EQ(reported, 2);
  // An invalid point is never measured.
  s.valid = [](const sched::Params& p) { return std::get<sched::PointwiseParams>(p).cpu_vector_width != 4; };
  const SearchResult v = search(s, sched::PointwiseParams{}, cost, Strategy::Exhaustive, {1e9, 0}, 0);
  for (const Trial& t : v.trials) EXPECT_NE(std::get<sched::PointwiseParams>(t.params).cpu_vector_width, 4);
}

TEST(Strategy, TrialCapIsABudget) {
  const CostFn cost = [](const sched::Params& p, std::string*) -> std::optional<double> { return synthetic_cost(p); };
  const SearchResult r = search(grid_space(), sched::PointwiseParams{}, cost, Strategy::Exhaustive, {1e9, 5}, 0);
  EXPECT_EQ(r.trials.size(), 5u);
  EXPECT_FALSE(r.exhausted);
  EXPECT_THROW(parse_strategy("annealing"), std::invalid_argument);
  EXPECT_EQ(parse_strategy("random"), Strategy::Random);
}

TEST(Measure, ReportsFailuresAndCountsSamples) {
  int n = 0;
  const Measurement ok = measure([&] { ++n; }, MeasureOptions{1, 5, 10.0, 1e-5, false});
  EXPECT_TRUE(ok.ok);
  EXPECT_EQ(ok.samples, 5);
  EXPECT_GE(ok.launches_per_sample, 1);
  EXPECT_EQ(n, 1 + 5 * ok.launches_per_sample);
  EXPECT_LE(ok.min_seconds, ok.median_seconds);
  const Measurement bad = measure([] { throw std::runtime_error("launch failed: bad grid"); }, MeasureOptions{});
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.error, "launch failed: bad grid");
  // A zero time limit: measured once, flagged.
  const Measurement cut = measure([] {}, MeasureOptions{1, 5, 0.0, 1e-5, false});
  EXPECT_TRUE(cut.ok);
  EXPECT_TRUE(cut.hit_time_limit);
  EXPECT_EQ(cut.samples, 1);
}

TEST(Verify, CandidateOutputsAreComparedNormWise) {
  auto rng = test::rng(13);
  std::normal_distribution<float> d(0.f, 30.f);
  std::vector<float> want(257);
  for (float& v : want) v = d(rng);
  want[3] = 0.f;
  want[9] = std::numeric_limits<float>::infinity();
  want[10] = std::numeric_limits<float>::quiet_NaN();
  const size_t bytes = want.size() * sizeof(float);
  std::vector<float> got = want;
  EXPECT_EQ(compare_outputs(want.data(), got.data(), bytes, DType::Float32), "");
  // Reordered partial sums: every element moved by a little of the output's scale, even a zero.
  for (size_t i = 0; i < got.size(); ++i)
    if (std::isfinite(got[i])) got[i] += 1e-5f * 100.f;
  EXPECT_EQ(compare_outputs(want.data(), got.data(), bytes, DType::Float32), "");
  got = want;
  got[7] = want[7] + 5.f;  // garbage in one element
  EXPECT_EQ(compare_outputs(want.data(), got.data(), bytes, DType::Float32).rfind("wrong result: element 7 ", 0), 0u);
  got = want;
  got[10] = 1.f;  // a NaN lost
  EXPECT_NE(compare_outputs(want.data(), got.data(), bytes, DType::Float32), "");
  got = want;
  got[9] = 3e38f;  // an infinity turned finite
  EXPECT_NE(compare_outputs(want.data(), got.data(), bytes, DType::Float32), "");
  got = want;
  got[20] = std::numeric_limits<float>::quiet_NaN();  // a NaN from nowhere
  EXPECT_NE(compare_outputs(want.data(), got.data(), bytes, DType::Float32), "");
  // Integers are exact.
  const std::vector<int64_t> iw = {1, 2, 3, -4}, ig = {1, 2, 4, -4};
  EXPECT_EQ(compare_outputs(iw.data(), iw.data(), 32, DType::Int64), "");
  EXPECT_NE(compare_outputs(iw.data(), ig.data(), 32, DType::Int64), "");
  // Half types at their own precision: one float16 ulp passes, ten percent does not.
  const std::vector<uint16_t> hw = {dsl::float_to_half_bits(1.0f), dsl::float_to_half_bits(-2.0f)};
  const std::vector<uint16_t> h1 = {dsl::float_to_half_bits(1.0009765625f), hw[1]};
  const std::vector<uint16_t> h2 = {dsl::float_to_half_bits(1.1f), hw[1]};
  EXPECT_EQ(compare_outputs(hw.data(), h1.data(), 4, DType::Float16), "");
  EXPECT_NE(compare_outputs(hw.data(), h2.data(), 4, DType::Float16), "");
}

#ifdef FLOW_HAS_LLVM

TEST(WorkloadKey, DependsOnSizesAndLayoutNotOnParams) {
  auto key_of = [](const dsl::Graph& g, const std::vector<std::vector<int64_t>>& strides) {
    auto exe = jit::compile(g, strides, {});
    std::vector<std::string> keys;
    for (int k = 0; k < exe->num_kernels(); ++k)
      keys.push_back(sched::workload_key(exe->instance(k), dsl::Target::CPU));
    return keys;
  };
  const auto a = key_of(two_kernel_graph(8, 64), {});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_NE(a[0], a[1]);
  EXPECT_EQ(a, key_of(two_kernel_graph(8, 64), {}));                  // deterministic
  EXPECT_NE(a, key_of(two_kernel_graph(8, 128), {}));                 // sizes matter
  EXPECT_NE(a[0], key_of(two_kernel_graph(8, 64), {{1, 8}, {}})[0]);  // layouts matter
  EXPECT_EQ(a[0].size(), 32u);
}

TEST(Tuner, TunesInPlaceKeepsOutputsAndHonoursRecords) {
  auto rng = test::rng(11);
  const dsl::Graph g = two_kernel_graph(64, 3000);
  const auto x = random_tensor({64, 3000}, rng), y = random_tensor({64, 3000}, rng);
  auto exe = jit::compile(g, {}, {});
  ASSERT_EQ(exe->num_kernels(), 2);
  const auto before = exe->run({x, y});

  TuneOptions opt;
  opt.budget_seconds = 1e9;
  opt.max_trials_per_kernel = 4;
  opt.measure = MeasureOptions{1, 3, 1.0, 1e-4, false};
  std::vector<TuningRecord> appended;
  size_t calls = 0;
  const auto results =
      tune_executable(*exe, {x, y}, opt, nullptr, [&](const KernelTuneResult& r, size_t done, size_t total) {
        ++calls;
        EXPECT_EQ(total, 2u);
        EXPECT_EQ(done, calls);
        appended.push_back(r.record);
      });
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    EXPECT_EQ(r.status, "tuned") << r.name;
    EXPECT_EQ(r.candidates, 4) << r.name;
    EXPECT_EQ(r.failed, 0) << r.name << ": " << (r.errors.empty() ? "" : r.errors[0]);  // none rejected as wrong
    EXPECT_GT(r.default_us, 0);
    EXPECT_LE(r.best_us, r.default_us);  // the default is a candidate: the winner is never slower
    EXPECT_EQ(r.record.target, jit::target_id(exe->options()));
  }
  EXPECT_EQ(results[0].scheduler, "pointwise");
  EXPECT_EQ(results[1].scheduler, "reduction");
  for (int k = 0; k < 2; ++k) EXPECT_EQ(exe->kernel_origin(k), "tuned");
  // Tuned kernels compute the same results (bit for bit: only the schedule changed... up to the
  // partial-sum order of the reduction, so compare with a tolerance there).
  const auto after = exe->run({x, y});
  const float* b0 = static_cast<const float*>(before[0].data());
  const float* a0 = static_cast<const float*>(after[0].data());
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(b0[i], a0[i]) << i;
  const float* b1 = static_cast<const float*>(before[1].data());
  const float* a1 = static_cast<const float*>(after[1].data());
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_NEAR(b1[i], a1[i], 1e-6f + 1e-5f * std::fabs(b1[i])) << i;

  // The records drive the next compile; a second tune with them measures nothing.
  auto db = std::make_shared<TuningDatabase>();
  for (const auto& r : appended) db->add(r);
  jit::CompileOptions co;
  co.tuning = db;
  auto exe2 = jit::compile(g, {}, co);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(exe2->kernel_origin(k), "record");
    EXPECT_EQ(sched::params_to_json(exe2->kernels()[k]->scheduled.params), results[k].best_params);
  }
  const auto again = tune_executable(*exe2, {x, y}, opt, db.get(), nullptr);
  for (const auto& r : again) {
    EXPECT_EQ(r.status, "record");
    EXPECT_EQ(r.candidates, 0);
  }
  // A record for another target is not used.
  auto other = std::make_shared<TuningDatabase>();
  for (auto r : appended) {
    r.target = "llvm/some-other-cpu";
    other->add(r);
  }
  co.tuning = other;
  auto exe3 = jit::compile(g, {}, co);
  for (int k = 0; k < 2; ++k) EXPECT_EQ(exe3->kernel_origin(k), "heuristic");
  // A record whose params no kernel can run with (edited by hand, or from another version) is
  // ignored: the heuristics compile instead, and the results are right.
  auto bad = std::make_shared<TuningDatabase>();
  for (auto r : appended) {
    r.params_json = r.params_json.find("reduction") != std::string::npos
                        ? R"({"kind":"reduction","cpu_rows_per_task":1,"cpu_vector_width":8,"gpu_block_x":1024,)"
                          R"("gpu_block_y":4})"
                        : R"({"kind":"pointwise","cpu_tile":0,"cpu_vector_width":8})";
    bad->add(r);
  }
  co.tuning = bad;
  auto exe4 = jit::compile(g, {}, co);
  for (int k = 0; k < 2; ++k) EXPECT_EQ(exe4->kernel_origin(k), "heuristic");
  const auto out4 = exe4->run({x, y});
  const float* c1 = static_cast<const float*>(out4[1].data());
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_NEAR(b1[i], c1[i], 1e-6f + 1e-5f * std::fabs(b1[i])) << i;
  // The tuner given those records tunes the workloads again rather than applying them.
  for (const auto& r : tune_executable(*exe4, {x, y}, opt, bad.get(), nullptr)) EXPECT_EQ(r.status, "tuned") << r.name;
}

TEST(Records, ParamsNoKernelCanRunWithAreNamed) {
  for (const char* json :
       {R"({"kind":"reduction","gpu_block_x":1024,"gpu_block_y":2})", R"({"kind":"reduction","gpu_block_x":0})",
        R"({"kind":"reduction","cpu_vector_width":-1})", R"({"kind":"pointwise","gpu_threads":2048})",
        R"({"kind":"pointwise","cpu_tile":0})", R"({"kind":"pointwise","gpu_vector_width":0})"})
    EXPECT_NE(sched::params_problem(sched::params_from_json(json)), "") << json;
  EXPECT_EQ(sched::params_problem(sched::params_from_json(R"({"kind":"reduction","gpu_block_x":32,"gpu_block_y":32})")),
            "");
  EXPECT_EQ(sched::params_problem(sched::PointwiseParams{}), "");
}

TEST(Tuner, EveryReductionGridPointComputesTheSameResult) {
  // Each CPU reduction Params of the search space, forced through a record, against the heuristic.
  auto rng = test::rng(12);
  for (int64_t rows : {1, 5, 64, 67}) {
    const dsl::Graph g = two_kernel_graph(rows, 33);
    const auto x = random_tensor({rows, 33}, rng), y = random_tensor({rows, 33}, rng);
    auto exe = jit::compile(g, {}, {});
    const auto ref = exe->run({x, y});
    const std::string w = sched::workload_key(exe->instance(1), dsl::Target::CPU);
    const SearchSpace space = search_space(exe->instance(1), exe->kernels()[1]->scheduled.params, dsl::Target::CPU);
    ASSERT_EQ(space.size(), 12u);
    for (size_t i = 0; i < space.size(); ++i) {
      TuningRecord r = make_record(w, jit::target_id(exe->options()), 1, 0);
      r.scheduler = "reduction";
      r.params_json = sched::params_to_json(space.at(space.unflatten(i)));
      auto db = std::make_shared<TuningDatabase>();
      db->add(r);
      jit::CompileOptions co;
      co.tuning = db;
      auto tuned = jit::compile(g, {}, co);
      ASSERT_EQ(tuned->kernel_origin(1), "record");
      const auto out = tuned->run({x, y});
      const float* rf = static_cast<const float*>(ref[1].data());
      const float* o = static_cast<const float*>(out[1].data());
      for (int64_t j = 0; j < x.numel(); ++j)
        ASSERT_NEAR(rf[j], o[j], 1e-6f) << rows << " " << r.params_json << " " << j;
    }
  }
}

TEST(Tuner, LibraryImplementationsAreTimedRecordedAndReused) {
  if (!runtime::onednn::available()) GTEST_SKIP() << "built without oneDNN";
  auto rng = test::rng(13);
  dsl::Graph g;
  const int x = g.add_input({{2, 8, 20, 20}, DType::Float32}, "x");
  const int w = g.add_input({{16, 8, 3, 3}, DType::Float32}, "w");
  const int c = g.add("conv2d", {x, w}, {{"padding", int64_t{1}}});
  g.mark_output(g.add("relu", {c}));
  const auto tx = random_tensor({2, 8, 20, 20}, rng), tw = random_tensor({16, 8, 3, 3}, rng);
  auto exe = jit::compile(g, {}, {});
  ASSERT_EQ(exe->num_library_calls(), 1);
  ASSERT_EQ(exe->library_steps()[0].workload.size(), 32u);
  const auto ref = exe->run({tx, tw});
  runtime::onednn::ImplInfo info;
  {
    std::vector<const jit::Tensor*> values;  // what the library sees: checked through a hook
    exe->run_with_hook({tx, tw}, nullptr, [&](size_t i, const std::vector<const jit::Tensor*>& v) {
      jit::run_library_group(exe->graph(), exe->library_steps()[i], v, &info);
    });
  }
  ASSERT_FALSE(info.available.empty());
  EXPECT_EQ(info.chosen, info.available[0]);  // "" picks oneDNN's first choice

  TuneOptions opt;
  opt.budget_seconds = 1e9;
  opt.measure = MeasureOptions{1, 3, 1.0, 1e-4, false};
  const auto results = tune_executable(*exe, {tx, tw}, opt, nullptr, nullptr);
  const KernelTuneResult* lib = nullptr;
  for (const auto& r : results)
    if (r.scheduler == "oneDNN") lib = &r;
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(lib->status, "tuned");
  int searchable = 0;
  for (const auto& name : info.available) searchable += name.find("ref:") == std::string::npos ? 1 : 0;
  EXPECT_EQ(lib->candidates, std::max(1, searchable));
  EXPECT_LE(lib->best_us, lib->default_us);
  const std::string impl = Json::parse(lib->best_params).at("impl").as_string();
  EXPECT_NE(std::find(info.available.begin(), info.available.end(), impl), info.available.end());
  EXPECT_EQ(exe->library_steps()[0].impl, impl);
  EXPECT_EQ(exe->library_steps()[0].impl_origin, "tuned");
  // Whatever implementation won computes the same convolution.
  const auto out = exe->run({tx, tw});
  const float* r0 = static_cast<const float*>(ref[0].data());
  const float* o0 = static_cast<const float*>(out[0].data());
  for (int64_t i = 0; i < ref[0].numel(); ++i) ASSERT_NEAR(r0[i], o0[i], 1e-4f * (1.f + std::fabs(r0[i]))) << i;

  // The record selects the implementation at the next compile.
  auto db = std::make_shared<TuningDatabase>();
  for (const auto& r : results)
    if (r.status == "tuned") db->add(r.record);
  jit::CompileOptions co;
  co.tuning = db;
  auto exe2 = jit::compile(g, {}, co);
  EXPECT_EQ(exe2->library_steps()[0].impl, impl);
  EXPECT_EQ(exe2->library_steps()[0].impl_origin, "record");
  EXPECT_NE(exe2->explain(false).find("implementation: record"), std::string::npos);
  // Every offered implementation runs and agrees (a bad name falls back to the first choice).
  for (std::string name : info.available) {
    exe2->set_library_impl(0, name, "test");
    const auto o = exe2->run({tx, tw});
    const float* p = static_cast<const float*>(o[0].data());
    for (int64_t i = 0; i < ref[0].numel(); ++i) ASSERT_NEAR(r0[i], p[i], 1e-4f * (1.f + std::fabs(r0[i]))) << name;
  }
  exe2->set_library_impl(0, "no-such-implementation", "test");
  const auto o = exe2->run({tx, tw});
  EXPECT_NEAR(static_cast<const float*>(o[0].data())[5], r0[5], 1e-4f * (1.f + std::fabs(r0[5])));
}

// Kernels that share a workload (the same work on different values: every block of a ResNet stage)
// share the tuned kernel, not their buffers: after tuning each still reads and writes its own
// values (the winner's launch arguments were once given to every kernel of the workload).
TEST(Tuner, KernelsSharingAWorkloadKeepTheirOwnBuffers) {
  auto rng = test::rng(14);
  dsl::Graph g;
  const int x = g.add_input({{48, 1000}, DType::Float32}, "x");
  const int y = g.add_input({{48, 1000}, DType::Float32}, "y");
  g.mark_output(g.add("tanh", {x}));
  g.mark_output(g.add("tanh", {y}));
  const auto tx = random_tensor({48, 1000}, rng), ty = random_tensor({48, 1000}, rng);
  auto exe = jit::compile(g, {}, {});
  ASSERT_EQ(exe->num_kernels(), 2);
  const auto before = exe->run({tx, ty});
  TuneOptions opt;
  opt.budget_seconds = 1e9;
  opt.max_trials_per_kernel = 3;
  opt.measure = MeasureOptions{1, 3, 1.0, 1e-4, false};
  const auto results = tune_executable(*exe, {tx, ty}, opt, nullptr, nullptr);
  ASSERT_EQ(results.size(), 1u);  // one workload
  EXPECT_EQ(results[0].uses, 2);
  for (int k = 0; k < 2; ++k) EXPECT_EQ(exe->kernel_origin(k), "tuned");
  const auto after = exe->run({tx, ty});
  for (int o = 0; o < 2; ++o) {
    const float* b = static_cast<const float*>(before[o].data());
    const float* a = static_cast<const float*>(after[o].data());
    for (int64_t i = 0; i < tx.numel(); ++i) ASSERT_EQ(a[i], b[i]) << "output " << o << " element " << i;
  }
  // The same through a record (a later compile honouring it).
  auto db = std::make_shared<TuningDatabase>();
  db->add(results[0].record);
  const auto again = tune_executable(*exe, {tx, ty}, opt, db.get(), nullptr);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].status, "record");
  const auto third = exe->run({tx, ty});
  for (int o = 0; o < 2; ++o) {
    const float* b = static_cast<const float*>(before[o].data());
    const float* a = static_cast<const float*>(third[o].data());
    for (int64_t i = 0; i < tx.numel(); ++i) ASSERT_EQ(a[i], b[i]) << "record, output " << o << " element " << i;
  }
}

#endif  // FLOW_HAS_LLVM
