package job

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/ops"
	"github.com/pp-offline/pp-offline/infer/weights"
	"github.com/pp-offline/pp-offline/internal/fileio"
)

// QuantizeOptions configure QuantizeFile.
type QuantizeOptions struct {
	MoshiWeight string // the float LM checkpoint (.safetensors)
	Output      string
	Format      string // q8_0 or q4_k
	ToolVersion string // recorded in the file
	Threads     int    // CPU threads (0: GOMAXPROCS)
	Log         Logger
}

// QuantizeReport is what QuantizeFile wrote.
type QuantizeReport struct {
	Quantized, Kept         int   // tensors
	SourceBytes, QuantBytes int64 // of the quantized tensors, before and after
	FileBytes               int64
	SHA256                  string // of the source
}

// QuantizeFile writes a quantized copy of an LM checkpoint (the layout of
// infer/weights/quantfile.go): the tensors lm.QuantDType picks as blocks,
// the others as they are, the source's metadata kept and the format, the
// source's sha256 and the tool version added. It streams tensor by tensor:
// the source stays mapped, and beyond it only one tensor's blocks and the
// writer's buffer are held.
func QuantizeFile(o QuantizeOptions) (*QuantizeReport, error) {
	if o.Log == nil {
		o.Log = nopLog{}
	}
	e, err := ops.NewEngine(ops.EngineOptions{Threads: o.Threads})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	format, err := weights.ParseQuantFormat(o.Format)
	if err != nil {
		return nil, err
	}
	f, err := weights.Open(o.MoshiWeight)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep := &QuantizeReport{}
	meta := map[string]string{}
	for k, v := range f.Metadata {
		if strings.HasPrefix(k, "pp_offline.") {
			return nil, fmt.Errorf("%s: already written by pp-offline quantize (%s): quantize the float checkpoint", o.MoshiWeight, k)
		}
		meta[k] = v
	}
	// NaN or Inf would be written into the blocks' scales: refused first.
	if err := f.CheckFinite(); err != nil {
		return nil, err
	}
	o.Log.Infof("hashing %s", o.MoshiWeight)
	if rep.SHA256, err = fileSHA256(o.MoshiWeight); err != nil {
		return nil, err
	}
	meta[weights.MetaFormat] = weights.QuantFormat
	meta[weights.MetaQuant] = strings.ToLower(o.Format)
	meta[weights.MetaSourceSHA256] = rep.SHA256
	meta[weights.MetaToolVersion] = o.ToolVersion
	names := f.Names()
	hs := make([]weights.Header, len(names))
	dts := make([]weights.DType, len(names))
	var largest int64
	for i, n := range names {
		t, _ := f.Get(n)
		hs[i] = weights.Header{Name: n, DType: t.DType, Shape: t.Shape}
		dt := lm.QuantDType(n, format)
		if dt == "" || len(t.Shape) != 2 {
			rep.Kept++
			continue
		}
		switch t.DType {
		case weights.BF16, weights.F16, weights.F32:
		default:
			return nil, fmt.Errorf("%s: tensor %q: cannot quantize %s", o.MoshiWeight, n, t.DType)
		}
		h, k, v := weights.QuantizedHeader(n, dt, t.Shape)
		hs[i], dts[i], meta[k] = h, dt, v
		largest = max(largest, h.Bytes())
		rep.Quantized++
		rep.SourceBytes += int64(len(t.Data))
		rep.QuantBytes += h.Bytes()
	}
	o.Log.Infof("quantizing %d tensors of %s to %s (%.2f GB → %.2f GB), keeping %d", rep.Quantized, o.MoshiWeight, o.Format, float64(rep.SourceBytes)/1e9, float64(rep.QuantBytes)/1e9, rep.Kept)
	buf := make([]byte, 0, largest)
	err = fileio.WriteStreamAtomic(o.Output, func(w io.Writer) error {
		return weights.WriteStream(w, hs, meta, func(i int, w io.Writer) error {
			t, _ := f.Get(names[i])
			if dts[i] == "" {
				_, err := w.Write(t.Data)
				return err
			}
			b, err := weights.QuantizeTensorPar(t, dts[i], buf, e.Parallel)
			if err != nil {
				return err
			}
			_, err = w.Write(b)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(o.Output); err == nil {
		rep.FileBytes = st.Size()
	}
	return rep, nil
}

func fileSHA256(path string) (string, error) {
	fd, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, fileio.PathErr(err))
	}
	defer fd.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fd); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
