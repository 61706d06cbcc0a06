package batchjob

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// Statuses of a report item.
const (
	StatusOK      = "ok"
	StatusSkipped = "skipped" // complete outputs were there (resume)
	StatusFailed  = "failed"
	StatusNotRun  = "not_run" // the job was interrupted before it finished
)

// Report is the summary --report writes (README "Batch jobs").
type Report struct {
	Manifest    string       `json:"manifest,omitempty"`
	InputDir    string       `json:"input_dir,omitempty"`
	Shard       string       `json:"shard"`
	ShardSource string       `json:"shard_source"`
	BatchSize   int          `json:"batch_size"`
	Started     time.Time    `json:"started"`
	Finished    *time.Time   `json:"finished,omitempty"`
	Interrupted string       `json:"interrupted,omitempty"` // the signal, when one stopped the job
	Error       string       `json:"error,omitempty"`       // what stopped the whole job, if anything
	Counts      Counts       `json:"counts"`
	Seconds     float64      `json:"audio_seconds"` // audio of the items run
	WallSeconds float64      `json:"wall_seconds"`
	Items       []ReportItem `json:"items"`

	mu sync.Mutex
}

// Counts are the items of each status.
type Counts struct {
	OK      int `json:"ok"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
	NotRun  int `json:"not_run"`
}

// ReportItem is one item's outcome.
type ReportItem struct {
	Index      int     `json:"index"`
	Line       int     `json:"line,omitempty"`
	InputWAV   string  `json:"input_wav"`
	OutputWAV  string  `json:"output_wav"`
	OutputText string  `json:"output_text"`
	Status     string  `json:"status"`
	Reason     string  `json:"reason,omitempty"`
	Frames     int     `json:"frames,omitempty"`
	Seconds    float64 `json:"seconds,omitempty"`
	Seed       *int64  `json:"seed,omitempty"`
}

// NewReport lists items as not run yet.
func NewReport(items []*Item) *Report {
	r := &Report{Started: time.Now().UTC().Truncate(time.Millisecond)}
	for _, it := range items {
		r.Items = append(r.Items, ReportItem{Index: it.Index, Line: it.Line, InputWAV: it.InputWAV,
			OutputWAV: it.OutputWAV, OutputText: it.OutputText, Status: StatusNotRun})
	}
	r.recount()
	return r
}

// Set records item i's (its position in NewReport's list) outcome.
func (r *Report) Set(i int, status, reason string, frames int, seconds float64, seed *int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := &r.Items[i]
	e.Status, e.Reason, e.Frames, e.Seconds, e.Seed = status, reason, frames, seconds, seed
	if status == StatusOK {
		r.Seconds += seconds
	}
	r.recount()
}

// CountsNow returns the counts so far.
func (r *Report) CountsNow() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Counts
}

func (r *Report) recount() {
	r.Counts = Counts{}
	for _, e := range r.Items {
		switch e.Status {
		case StatusOK:
			r.Counts.OK++
		case StatusSkipped:
			r.Counts.Skipped++
		case StatusFailed:
			r.Counts.Failed++
		default:
			r.Counts.NotRun++
		}
	}
}

// Write writes the report to path atomically (temporary file + rename);
// final stamps the end time.
func (r *Report) Write(path string, final bool) error {
	r.mu.Lock()
	r.WallSeconds = time.Since(r.Started).Seconds()
	if final {
		t := time.Now().UTC().Truncate(time.Millisecond)
		r.Finished = &t
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(r)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return fileio.WriteAtomic(path, b.Bytes())
}

// CheckReportShard refuses a --report file that holds another shard's
// report of a job split in shards: shards given one report path would
// each replace the others' (only the last would stay). A missing or
// unreadable file is no objection (it is replaced).
func CheckReportShard(path string, s Shard) error {
	if s.Count <= 1 {
		return nil
	}
	// Read as one of our outputs, not registered as an input (that would
	// make the guard refuse to write this shard's report over it).
	data, err := readOutput(path, 256<<20)
	if err != nil {
		return nil
	}
	var r struct {
		Shard string `json:"shard"`
	}
	if json.Unmarshal(data, &r) != nil || r.Shard == "" || r.Shard == s.String() {
		return nil
	}
	return fmt.Errorf("--report %s holds the report of shard %s, this is shard %s: give each shard its own report file (e.g. report-$SLURM_ARRAY_TASK_ID.json), or one shard's report replaces another's", path, r.Shard, s)
}

// readOutput reads one of the job's own output files (a report, a
// fingerprint) to decide about it, without registering it as an input:
// opened without blocking, only a regular file, at most limit bytes.
func readOutput(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, pathErr(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, pathErr(err))
	}
	if !st.Mode().IsRegular() || st.Size() > limit {
		return nil, errNotOurs
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, pathErr(err))
	}
	if int64(len(data)) > limit {
		return nil, errNotOurs
	}
	return data, nil
}

var errNotOurs = errors.New("not a file this tool writes")
