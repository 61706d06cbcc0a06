package batchjob

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard is the part of the items one process runs: those whose Index ≡
// Index (mod Count).
type Shard struct {
	Index, Count int
	Source       string // where it came from, for the log
}

// String is "i/n".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Select returns the items of the shard, in order.
func (s Shard) Select(items []*Item) []*Item {
	var out []*Item
	for _, it := range items {
		if it.Index%s.Count == s.Index {
			out = append(out, it)
		}
	}
	return out
}

// ParseShard parses --shard "i/n" (0 ≤ i < n).
func ParseShard(v string) (Shard, error) {
	a, b, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("--shard %q: want i/n, e.g. 0/4", v)
	}
	if n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("--shard %q: want 0 ≤ i < n", v)
	}
	return Shard{Index: i, Count: n, Source: "--shard " + v}, nil
}

// ShardEnv is the count of Kubernetes Indexed Job shards when
// --shard-count is not given: set it to the Job's spec.completions.
const ShardEnv = "JOB_COMPLETIONS"

// FindShard picks the shard: flag (--shard i/n) first, then a Slurm job
// array, then a Kubernetes Indexed Job (JOB_COMPLETION_INDEX with
// shardCount, else $JOB_COMPLETIONS); else the whole list (0/1).
//
// In a Slurm array with shardCount (--shard-count N, as
// scripts/slurm-array.sh passes it) the task id is the shard: 0 ≤ id < N,
// so a rerun of some tasks (`sbatch --array=2`, `--array=1,3`) runs those
// tasks' shards of the original array; an id outside is refused. Without
// it the array itself gives the count (SLURM_ARRAY_TASK_MIN, _COUNT, _STEP,
// _MAX): it must then be dense (MAX = MIN + STEP·(COUNT−1)); a sparse
// array, or a single task other than 0 (a rerun of one task of a larger
// array), is refused with the hint to pass --shard-count, since its count
// is not the original array's. (A dense part, --array=2-3 of 0-3, cannot
// be told from a whole array: reruns need --shard-count.)
func FindShard(flag string, shardCount int, getenv func(string) string) (Shard, error) {
	if flag != "" {
		if shardCount != 0 {
			return Shard{}, fmt.Errorf("--shard-count goes with a Slurm array or JOB_COMPLETION_INDEX, not with --shard")
		}
		return ParseShard(flag)
	}
	num := func(name string) (int, bool, error) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, true, fmt.Errorf("%s=%q is not an integer", name, v)
		}
		return n, true, nil
	}
	if id, ok, err := num("SLURM_ARRAY_TASK_ID"); ok || err != nil {
		if err != nil {
			return Shard{}, err
		}
		return slurmShard(id, shardCount, num)
	}
	if idx, ok, err := num("JOB_COMPLETION_INDEX"); ok || err != nil {
		if err != nil {
			return Shard{}, err
		}
		src := "--shard-count"
		n := shardCount
		if n == 0 {
			c, okC, err := num(ShardEnv)
			if err != nil {
				return Shard{}, err
			}
			if !okC {
				return Shard{}, fmt.Errorf("JOB_COMPLETION_INDEX=%d without --shard-count or %s (set it to the Job's completions)", idx, ShardEnv)
			}
			n, src = c, ShardEnv
		}
		if n < 1 || idx < 0 || idx >= n {
			return Shard{}, fmt.Errorf("JOB_COMPLETION_INDEX=%d is not below the shard count %d", idx, n)
		}
		return Shard{Index: idx, Count: n, Source: fmt.Sprintf("Kubernetes Indexed Job (JOB_COMPLETION_INDEX=%d, %s=%d)", idx, src, n)}, nil
	}
	if shardCount != 0 {
		return Shard{}, fmt.Errorf("--shard-count without JOB_COMPLETION_INDEX")
	}
	return Shard{Index: 0, Count: 1, Source: "no shard given"}, nil
}

// slurmShard is FindShard's Slurm array case (see there).
func slurmShard(id, shardCount int, num func(string) (int, bool, error)) (Shard, error) {
	if shardCount != 0 {
		if id < 0 || id >= shardCount {
			return Shard{}, fmt.Errorf("the Slurm array task %d is outside --shard-count %d: the task ids are the shards 0 to %d (submit --array=0-%d, or a part of it to rerun)", id, shardCount, shardCount-1, shardCount-1)
		}
		return Shard{Index: id, Count: shardCount, Source: fmt.Sprintf("Slurm array task %d, --shard-count %d", id, shardCount)}, nil
	}
	lo, okMin, err1 := num("SLURM_ARRAY_TASK_MIN")
	count, okCount, err2 := num("SLURM_ARRAY_TASK_COUNT")
	step, okStep, err3 := num("SLURM_ARRAY_TASK_STEP")
	hi, okMax, err4 := num("SLURM_ARRAY_TASK_MAX")
	for _, e := range []error{err1, err2, err3, err4} {
		if e != nil {
			return Shard{}, e
		}
	}
	if !okMin || !okCount {
		return Shard{}, fmt.Errorf("SLURM_ARRAY_TASK_ID=%d without SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT: pass --shard-count N (the array's size) or --shard i/n", id)
	}
	if !okStep || step < 1 {
		step = 1
	}
	hint := "pass --shard-count N, the original array's size (scripts/slurm-array.sh does), so that each task runs its own shard"
	switch {
	case count < 1:
		return Shard{}, fmt.Errorf("SLURM_ARRAY_TASK_COUNT=%d: not an array", count)
	case okMax && hi != lo+step*(count-1):
		return Shard{}, fmt.Errorf("the Slurm array is sparse (%d tasks from %d to %d): %s", count, lo, hi, hint)
	case count == 1 && id != 0:
		return Shard{}, fmt.Errorf("the Slurm array is the one task %d (a rerun of one task of a larger array?): %s", id, hint)
	}
	i := (id - lo) / step
	if id < lo || (id-lo)%step != 0 || i >= count {
		return Shard{}, fmt.Errorf("the Slurm array task %d is not one of %d tasks from %d step %d: pass --shard i/n", id, count, lo, step)
	}
	return Shard{Index: i, Count: count, Source: fmt.Sprintf("Slurm array task %d (SLURM_ARRAY_TASK_MIN=%d, SLURM_ARRAY_TASK_COUNT=%d)", id, lo, count)}, nil
}
