// Package offload plans where the weights of the PersonaPlex LM live when
// the device cannot hold them all, predicts the frame time of a plan, and
// runs a plan's memory side on a simulated device. See docs/OFFLOAD.md.
//
// # Units
//
// NewLM derives, from the config and the tensors the model declares for
// each unit (lm.Units builds them from the LM's one tensor declaration:
// offload spells no checkpoint name), the units a plan places, in
// execution order for one frame: each temporal transformer layer (never
// split), the output head (out_norm + text_linear), and each depformer
// step's weights (its slice of every depformer layer's attention and
// gating, with the layers' norms, plus depformer_in[step] and
// linears[step]). Only the steps run per frame are units (8 of 16 in
// offline inference: the user stream's tokens are provided); the embedding
// tables are gathered a row per token on the host and never need device
// memory. Every weight is bf16. Unit.Pack lays a unit out as one contiguous
// blob, the form in which it is streamed and handed to the executor.
//
// # Placements and the cost model
//
// Each unit is Resident (on the device), Streamed (pinned host memory,
// copied into one of two staging slots ahead of use, at most once per
// frame) or CPU (host memory, computed on the CPU, its KV cache on the
// host too). Figures (bandwidths, compute, latencies — each with where it
// came from: default, declared or measured) and a Workload (batch, decode
// or prefill of T positions, attention span) give every unit a compute
// time per placement and a copy time; the schedule (see schedule.go) is
// simulated for a few frames and the steady-state frame time is the
// prediction. Problem.Solve picks the placement with the least predicted
// frame time whose device memory — resident weights, staging slots, the
// KV cache of the layers computed on the device (float32, full context),
// and a workspace — fits the device budget, and whose host memory fits the
// host budget if one is given. Accelerate models what the reference's
// --cpu-offload does at the same budget.
//
// # Running a plan
//
// Device is what an accelerator implements for offload (memory under a
// budget, streams, asynchronous host→device copies, fences: one CUDA
// driver-API call each); SimDevice is one, device memory in RAM under a
// hard budget. Runtime uploads the resident units, streams the others
// through staging slots ordered by fences, hands the executor each unit's
// View (Acquire/Release: a buffer and offset, and host-visible bytes) and
// records the timeline
// (Timeline.Check asserts the engine's invariants). See Runtime for the
// executor-facing API; lm.Placed is the executor that runs the LM through
// it (pp-offline --device sim), and Plan.Replay re-times a plan with
// measured computes (pp-offline tune).
package offload
