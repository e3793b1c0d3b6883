#include "tensor/cpu/onednn_conv.h"

#include <oneapi/dnnl/dnnl.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/math_tally.h"
#include "tensor/cpu/onednn_threads.h"

namespace tandem::cpu {
namespace {

#define TANDEM_DNNL(expr)                            \
  do {                                               \
    const dnnl_status_t tandem_dnnl_status = (expr); \
    if (tandem_dnnl_status != dnnl_success) {        \
      return Failed(#expr, tandem_dnnl_status);      \
    }                                                \
  } while (false)

absl::Status Failed(const char* what, dnnl_status_t status) {
  return absl::InternalError(absl::StrCat(
      "oneDNN convolution: ", what, " returned status ",
      static_cast<int>(status),
      "; expected success (is libdnnl the build tandem was compiled "
      "against?)"));
}

struct PdDeleter {
  void operator()(dnnl_primitive_desc_t p) const {
    dnnl_primitive_desc_destroy(p);
  }
};
struct PrimDeleter {
  void operator()(dnnl_primitive_t p) const { dnnl_primitive_destroy(p); }
};
struct MemDeleter {
  void operator()(dnnl_memory_t m) const { dnnl_memory_destroy(m); }
};
using Pd =
    std::unique_ptr<std::remove_pointer_t<dnnl_primitive_desc_t>, PdDeleter>;
using Prim =
    std::unique_ptr<std::remove_pointer_t<dnnl_primitive_t>, PrimDeleter>;
using Mem = std::unique_ptr<std::remove_pointer_t<dnnl_memory_t>, MemDeleter>;

// One CPU engine and stream per thread, released at thread exit.
struct ThreadEngine {
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  ~ThreadEngine() {
    if (stream != nullptr) dnnl_stream_destroy(stream);
    if (engine != nullptr) dnnl_engine_destroy(engine);
  }
};

absl::StatusOr<ThreadEngine*> GetEngine() {
  thread_local ThreadEngine e;
  if (e.engine == nullptr) {
    TANDEM_DNNL(dnnl_engine_create(&e.engine, dnnl_cpu, 0));
    TANDEM_DNNL(
        dnnl_stream_create(&e.stream, e.engine, dnnl_stream_default_flags));
  }
  return &e;
}

dnnl_memory_desc_t Desc(std::vector<int64_t> dims, dnnl_format_tag_t tag) {
  dnnl_memory_desc_t md;
  dnnl_dims_t d;
  for (size_t i = 0; i < dims.size(); ++i) d[i] = dims[i];
  dnnl_memory_desc_init_by_tag(&md, static_cast<int>(dims.size()), d, dnnl_f32,
                               tag);
  return md;
}

// A reorder between two layouts of one tensor; a plain copy when equal.
struct Reorder {
  dnnl_memory_desc_t from;
  dnnl_memory_desc_t to;
  Prim prim;  // null when the layouts are equal
};

absl::StatusOr<Reorder> MakeReorder(dnnl_engine_t engine,
                                    const dnnl_memory_desc_t& from,
                                    const dnnl_memory_desc_t& to) {
  Reorder r{from, to, nullptr};
  if (dnnl_memory_desc_equal(&from, &to)) return r;
  // A reorder moves values without arithmetic: its own scratchpad.
  dnnl_primitive_desc_t pd = nullptr;
  const dnnl_status_t s = dnnl_reorder_primitive_desc_create(
      &pd, &from, engine, &to, engine, nullptr);
  if (s != dnnl_success) return Failed("dnnl_reorder_primitive_desc_create", s);
  Pd owned(pd);
  dnnl_primitive_t prim;
  TANDEM_DNNL(dnnl_primitive_create(&prim, pd));
  r.prim.reset(prim);
  return r;
}

size_t Floats(const dnnl_memory_desc_t& md) {
  return dnnl_memory_desc_get_size(&md) / sizeof(float);
}

// Runs `prim` with (argument, descriptor, pointer) triples, plus a
// scratchpad of `scratch_md`'s size.
absl::Status Execute(
    ThreadEngine& e, dnnl_primitive_t prim,
    const std::vector<std::tuple<int, const dnnl_memory_desc_t*, void*>>& args,
    const dnnl_memory_desc_t* scratch_md) {
  base::ScopedMathKernel tally;  // the network clock's FLOP-bound share
  std::vector<Mem> mems;
  std::vector<dnnl_exec_arg_t> exec;
  std::vector<float> scratch;
  auto add = [&](int arg, const dnnl_memory_desc_t* md,
                 void* ptr) -> absl::Status {
    dnnl_memory_t m;
    TANDEM_DNNL(dnnl_memory_create(&m, md, e.engine, ptr));
    mems.emplace_back(m);
    exec.push_back({arg, m});
    return absl::OkStatus();
  };
  for (const auto& [arg, md, ptr] : args) {
    absl::Status s = add(arg, md, ptr);
    if (!s.ok()) return s;
  }
  if (scratch_md != nullptr && dnnl_memory_desc_get_size(scratch_md) > 0) {
    scratch.resize(Floats(*scratch_md) + 1);
    absl::Status s = add(DNNL_ARG_SCRATCHPAD, scratch_md, scratch.data());
    if (!s.ok()) return s;
  }
  TANDEM_DNNL(dnnl_primitive_execute(
      prim, e.stream, static_cast<int>(exec.size()), exec.data()));
  TANDEM_DNNL(dnnl_stream_wait(e.stream));
  return absl::OkStatus();
}

// from (layout r.from at `src`) into layout r.to at `dst`.
absl::Status RunReorder(ThreadEngine& e, const Reorder& r, const float* src,
                        float* dst) {
  if (r.prim == nullptr) {
    if (src != dst) std::memcpy(dst, src, dnnl_memory_desc_get_size(&r.from));
    return absl::OkStatus();
  }
  return Execute(e, r.prim.get(),
                 {{DNNL_ARG_FROM, &r.from, const_cast<float*>(src)},
                  {DNNL_ARG_TO, &r.to, dst}},
                 nullptr);
}

enum class Kind { kForward, kBackwardWeights, kBackwardData };

struct Plan {
  Pd pd;
  Prim prim;
  dnnl_memory_desc_t scratch{};
  // Forward: weights in, dst out. Backward weights: diff_dst in,
  // diff_weights out. Backward data: weights in, diff_dst in, diff_src out.
  std::vector<Reorder> reorders;
  std::vector<dnnl_memory_desc_t> chosen;  // the primitive's layouts
};

using Key = std::array<int64_t, 14>;

Key KeyOf(Kind kind, const ConvProblem& p, bool bias) {
  const ConvGeometry& g = p.geometry;
  return {static_cast<int64_t>(kind),
          p.batch,
          g.channels,
          g.height,
          g.width,
          p.out_channels,
          g.kernel_h,
          g.kernel_w,
          g.stride_h,
          g.stride_w,
          g.pad_h,
          g.pad_w,
          bias ? 1 : 0,
          0};
}

struct Descs {
  dnnl_memory_desc_t src_user, wei_user, bias, dst_user;
  dnnl_memory_desc_t src_any, wei_any, dst_any;
  dnnl_dims_t strides, pad_l, pad_r;
};

Descs DescsOf(const ConvProblem& p) {
  const ConvGeometry& g = p.geometry;
  const int64_t oh = g.out_h(), ow = g.out_w();
  Descs d;
  d.src_user = Desc({p.batch, g.channels, g.height, g.width}, dnnl_nchw);
  d.src_any =
      Desc({p.batch, g.channels, g.height, g.width}, dnnl_format_tag_any);
  d.wei_user =
      Desc({p.out_channels, g.channels, g.kernel_h, g.kernel_w}, dnnl_oihw);
  d.wei_any = Desc({p.out_channels, g.channels, g.kernel_h, g.kernel_w},
                   dnnl_format_tag_any);
  d.bias = Desc({p.out_channels}, dnnl_x);
  d.dst_user = Desc({p.batch, p.out_channels, oh, ow}, dnnl_nchw);
  d.dst_any = Desc({p.batch, p.out_channels, oh, ow}, dnnl_format_tag_any);
  d.strides[0] = g.stride_h;
  d.strides[1] = g.stride_w;
  d.pad_l[0] = g.pad_h;
  d.pad_l[1] = g.pad_w;
  d.pad_r[0] = (oh - 1) * g.stride_h + g.kernel_h - g.height - g.pad_h;
  d.pad_r[1] = (ow - 1) * g.stride_w + g.kernel_w - g.width - g.pad_w;
  return d;
}

absl::StatusOr<Pd> CreatePd(ThreadEngine& e, const void* op_desc,
                            const_dnnl_primitive_desc_t hint) {
  dnnl_primitive_attr_t attr;
  TANDEM_DNNL(dnnl_primitive_attr_create(&attr));
  dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_primitive_desc_t pd = nullptr;
  const dnnl_status_t s =
      dnnl_primitive_desc_create(&pd, op_desc, attr, e.engine, hint);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return Failed("dnnl_primitive_desc_create", s);
  return Pd(pd);
}

absl::StatusOr<Pd> ForwardPd(ThreadEngine& e, Descs& d, bool bias) {
  dnnl_convolution_desc_t cd;
  TANDEM_DNNL(dnnl_convolution_forward_desc_init(
      &cd, dnnl_forward_training, dnnl_convolution_direct, &d.src_user,
      &d.wei_any, bias ? &d.bias : nullptr, &d.dst_any, d.strides, d.pad_l,
      d.pad_r));
  return CreatePd(e, &cd, nullptr);
}

absl::StatusOr<std::unique_ptr<Plan>> BuildPlan(ThreadEngine& e, Kind kind,
                                                const ConvProblem& p,
                                                bool bias) {
  Descs d = DescsOf(p);
  auto plan = std::make_unique<Plan>();
  absl::StatusOr<Pd> fwd = ForwardPd(e, d, bias);
  if (!fwd.ok()) return fwd.status();
  auto query = [&](dnnl_query_t what) {
    return *dnnl_primitive_desc_query_md(plan->pd.get(), what, 0);
  };
  auto add_reorder = [&](const dnnl_memory_desc_t& from,
                         const dnnl_memory_desc_t& to) -> absl::Status {
    absl::StatusOr<Reorder> r = MakeReorder(e.engine, from, to);
    if (!r.ok()) return r.status();
    plan->reorders.push_back(*std::move(r));
    return absl::OkStatus();
  };
  absl::Status s;
  switch (kind) {
    case Kind::kForward: {
      plan->pd = *std::move(fwd);
      const dnnl_memory_desc_t wei = query(dnnl_query_weights_md);
      const dnnl_memory_desc_t dst = query(dnnl_query_dst_md);
      plan->chosen = {wei, dst};
      s = add_reorder(d.wei_user, wei);
      if (s.ok()) s = add_reorder(dst, d.dst_user);
      break;
    }
    case Kind::kBackwardWeights: {
      dnnl_convolution_desc_t cd;
      TANDEM_DNNL(dnnl_convolution_backward_weights_desc_init(
          &cd, dnnl_convolution_direct, &d.src_user, &d.wei_any,
          bias ? &d.bias : nullptr, &d.dst_any, d.strides, d.pad_l, d.pad_r));
      absl::StatusOr<Pd> pd = CreatePd(e, &cd, fwd->get());
      if (!pd.ok()) return pd.status();
      plan->pd = *std::move(pd);
      const dnnl_memory_desc_t dwei = query(dnnl_query_diff_weights_md);
      const dnnl_memory_desc_t ddst = query(dnnl_query_diff_dst_md);
      plan->chosen = {dwei, ddst};
      s = add_reorder(d.dst_user, ddst);
      if (s.ok()) s = add_reorder(dwei, d.wei_user);
      break;
    }
    case Kind::kBackwardData: {
      dnnl_convolution_desc_t cd;
      TANDEM_DNNL(dnnl_convolution_backward_data_desc_init(
          &cd, dnnl_convolution_direct, &d.src_any, &d.wei_any, &d.dst_any,
          d.strides, d.pad_l, d.pad_r));
      absl::StatusOr<Pd> pd = CreatePd(e, &cd, fwd->get());
      if (!pd.ok()) return pd.status();
      plan->pd = *std::move(pd);
      const dnnl_memory_desc_t wei = query(dnnl_query_weights_md);
      const dnnl_memory_desc_t ddst = query(dnnl_query_diff_dst_md);
      const dnnl_memory_desc_t dsrc = query(dnnl_query_diff_src_md);
      plan->chosen = {wei, ddst, dsrc};
      s = add_reorder(d.wei_user, wei);
      if (s.ok()) s = add_reorder(d.dst_user, ddst);
      if (s.ok()) s = add_reorder(dsrc, d.src_user);
      break;
    }
  }
  if (!s.ok()) return s;
  plan->scratch = query(dnnl_query_scratchpad_md);
  dnnl_primitive_t prim;
  TANDEM_DNNL(dnnl_primitive_create(&prim, plan->pd.get()));
  plan->prim.reset(prim);
  return plan;
}

// The calling thread's plan for (kind, problem, bias), built on first use.
// Keeps the 16 most recently used plans.
absl::StatusOr<Plan*> GetPlan(ThreadEngine& e, Kind kind, const ConvProblem& p,
                              bool bias) {
  thread_local std::list<std::pair<Key, std::unique_ptr<Plan>>> cache;
  const Key key = KeyOf(kind, p, bias);
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (it->first == key) {
      cache.splice(cache.begin(), cache, it);
      return cache.front().second.get();
    }
  }
  absl::StatusOr<std::unique_ptr<Plan>> plan = BuildPlan(e, kind, p, bias);
  if (!plan.ok()) return plan.status();
  cache.emplace_front(key, *std::move(plan));
  constexpr size_t kMaxPlans = 16;
  if (cache.size() > kMaxPlans) cache.pop_back();
  return cache.front().second.get();
}

struct Prepared {
  ThreadEngine* engine;
  Plan* plan;
};

absl::StatusOr<Prepared> Prepare(Kind kind, const ConvProblem& p, bool bias) {
  ApplyBlasThreadsToOneDnn();
  absl::StatusOr<ThreadEngine*> e = GetEngine();
  if (!e.ok()) return e.status();
  absl::StatusOr<Plan*> plan = GetPlan(**e, kind, p, bias);
  if (!plan.ok()) return plan.status();
  return Prepared{*e, *plan};
}

std::vector<float> Buffer(const dnnl_memory_desc_t& md) {
  return std::vector<float>(Floats(md));
}

}  // namespace

bool PyTorchUsesOneDnn(const ConvProblem& p) {
  const ConvGeometry& g = p.geometry;
  const bool strided = g.stride_h != 1 || g.stride_w != 1;
  const bool pointwise = g.kernel_h == 1 && g.kernel_w == 1;
  if (!(strided || p.batch >= 16 || !pointwise)) return false;
  return (g.kernel_h > 3 && g.kernel_w > 3) || p.batch > 1 ||
         p.batch * g.channels * g.height * g.width > 20480;
}

absl::Status OneDnnConvForward(const ConvProblem& p, const float* x,
                               const float* w, const float* bias, float* y) {
  absl::StatusOr<Prepared> pr = Prepare(Kind::kForward, p, bias != nullptr);
  if (!pr.ok()) return pr.status();
  ThreadEngine& e = *pr->engine;
  Plan& plan = *pr->plan;
  const Descs d = DescsOf(p);
  std::vector<float> wei = Buffer(plan.chosen[0]);
  std::vector<float> dst = Buffer(plan.chosen[1]);
  absl::Status s = RunReorder(e, plan.reorders[0], w, wei.data());
  if (!s.ok()) return s;
  std::vector<std::tuple<int, const dnnl_memory_desc_t*, void*>> args = {
      {DNNL_ARG_SRC, &d.src_user, const_cast<float*>(x)},
      {DNNL_ARG_WEIGHTS, &plan.chosen[0], wei.data()},
      {DNNL_ARG_DST, &plan.chosen[1], dst.data()}};
  if (bias != nullptr) {
    args.push_back({DNNL_ARG_BIAS, &d.bias, const_cast<float*>(bias)});
  }
  s = Execute(e, plan.prim.get(), args, &plan.scratch);
  if (!s.ok()) return s;
  return RunReorder(e, plan.reorders[1], dst.data(), y);
}

absl::Status OneDnnConvBackwardWeights(const ConvProblem& p, const float* x,
                                       const float* dy, float* dw, float* db) {
  absl::StatusOr<Prepared> pr =
      Prepare(Kind::kBackwardWeights, p, db != nullptr);
  if (!pr.ok()) return pr.status();
  ThreadEngine& e = *pr->engine;
  Plan& plan = *pr->plan;
  const Descs d = DescsOf(p);
  std::vector<float> dwei = Buffer(plan.chosen[0]);
  std::vector<float> ddst = Buffer(plan.chosen[1]);
  absl::Status s = RunReorder(e, plan.reorders[0], dy, ddst.data());
  if (!s.ok()) return s;
  std::vector<std::tuple<int, const dnnl_memory_desc_t*, void*>> args = {
      {DNNL_ARG_SRC, &d.src_user, const_cast<float*>(x)},
      {DNNL_ARG_DIFF_DST, &plan.chosen[1], ddst.data()},
      {DNNL_ARG_DIFF_WEIGHTS, &plan.chosen[0], dwei.data()}};
  if (db != nullptr) args.push_back({DNNL_ARG_DIFF_BIAS, &d.bias, db});
  s = Execute(e, plan.prim.get(), args, &plan.scratch);
  if (!s.ok()) return s;
  return RunReorder(e, plan.reorders[1], dwei.data(), dw);
}

absl::Status OneDnnConvBackwardData(const ConvProblem& p, const float* w,
                                    const float* dy, float* dx) {
  absl::StatusOr<Prepared> pr = Prepare(Kind::kBackwardData, p, false);
  if (!pr.ok()) return pr.status();
  ThreadEngine& e = *pr->engine;
  Plan& plan = *pr->plan;
  std::vector<float> wei = Buffer(plan.chosen[0]);
  std::vector<float> ddst = Buffer(plan.chosen[1]);
  std::vector<float> dsrc = Buffer(plan.chosen[2]);
  absl::Status s = RunReorder(e, plan.reorders[0], w, wei.data());
  if (s.ok()) s = RunReorder(e, plan.reorders[1], dy, ddst.data());
  if (!s.ok()) return s;
  s = Execute(e, plan.prim.get(),
              {{DNNL_ARG_WEIGHTS, &plan.chosen[0], wei.data()},
               {DNNL_ARG_DIFF_DST, &plan.chosen[1], ddst.data()},
               {DNNL_ARG_DIFF_SRC, &plan.chosen[2], dsrc.data()}},
              &plan.scratch);
  if (!s.ok()) return s;
  return RunReorder(e, plan.reorders[2], dsrc.data(), dx);
}

}  // namespace tandem::cpu
