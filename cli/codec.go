package cli

import (
	"bytes"
	"fmt"
	"github.com/pp-offline/pp-offline/internal/fileio"
	"os"
	"strconv"

	"github.com/pp-offline/pp-offline/audio"
	"github.com/pp-offline/pp-offline/infer/backend/cpu"
	"github.com/pp-offline/pp-offline/infer/config"
	"github.com/pp-offline/pp-offline/infer/job"
	"github.com/pp-offline/pp-offline/infer/mimi"
	"github.com/pp-offline/pp-offline/infer/weights"
	ucli "github.com/urfave/cli/v2"
)

func init() {
	configFlag := &ucli.StringFlag{Name: "config", Usage: "model config.json with a \"mimi\" object (default: the real Mimi)"}
	weightFlag := &ucli.StringFlag{Name: "mimi-weight", Usage: "Mimi checkpoint (.safetensors), required"}
	register(&ucli.Command{
		Name:  "codec",
		Usage: "encode a WAV to Mimi codes or decode codes to a WAV (streaming, frame by frame)",
		Description: "Runs the Mimi codec alone, as offline.py drives it: 1920-sample frames (the last one\n" +
			"zero-padded), 8 codes per frame.",
		HideHelpCommand: true,
		Subcommands: []*ucli.Command{
			{
				Name:  "encode",
				Usage: "encode a WAV (first channel, resampled to 24 kHz) to codes",
				Description: "Writes a safetensors file with one I64 tensor \"codes\" of shape\n" +
					"[1, num_codebooks, frames], the codes mimi.encode gives frame by frame.",
				Flags: []ucli.Flag{configFlag, weightFlag,
					&ucli.StringFlag{Name: "input-wav", Usage: "input WAV file, required"},
					&ucli.StringFlag{Name: "output", Usage: "output codes file (.safetensors), required"},
				},
				Action: runCodecEncode,
			},
			{
				Name:  "decode",
				Usage: "decode codes to a 16-bit PCM WAV",
				Description: "Reads the I64 tensor \"codes\" [1, num_codebooks, frames] (as codec encode writes\n" +
					"it) and writes frames × 1920 samples (untrimmed), 16-bit PCM at 24 kHz.",
				Flags: []ucli.Flag{configFlag, weightFlag,
					&ucli.StringFlag{Name: "codes", Usage: "input codes file (.safetensors), required"},
					&ucli.StringFlag{Name: "output-wav", Usage: "output WAV file, required"},
				},
				Action: runCodecDecode,
			},
		},
	})
}

// codecArgs checks the command line of codec cmd before anything is read:
// no positional argument, and --mimi-weight and the required flags given,
// every missing one named in one line (usage errors, exit 2).
func codecArgs(c *ucli.Context, cmd string, required ...string) error {
	if c.NArg() != 0 {
		return unexpectedArgs(c, "codec "+cmd)
	}
	var missing []string
	for _, f := range append([]string{"mimi-weight"}, required...) {
		if c.String(f) == "" {
			missing = append(missing, "--"+f)
		}
	}
	if len(missing) > 0 {
		// The hint names the subcommand (main's names the command).
		return usageErrorf("%v (see %s codec %s --help)", missingFlags("codec "+cmd, missing), c.App.Name, cmd)
	}
	return nil
}

// codecModel loads the Mimi configuration (--config or the real Mimi) and
// checkpoint.
func codecModel(c *ucli.Context) (*mimi.Model, error) {
	cfg := config.DefaultMimi()
	if p := c.String("config"); p != "" {
		full, err := config.Load(p)
		if err != nil {
			return nil, err
		}
		cfg = full.Mimi
	}
	// The codec runs on a CPU backend of its own (its workers stop when the
	// model is no longer reachable).
	be, err := cpu.New(cpu.Options{Kernel: os.Getenv("PP_OFFLINE_KERNEL")})
	if err != nil {
		return nil, err
	}
	return mimi.Open(cfg, c.String("mimi-weight"), be, be.Engine())
}

func runCodecEncode(c *ucli.Context) error {
	if err := codecArgs(c, "encode", "input-wav", "output"); err != nil {
		return err
	}
	if err := codecOutputs(c, "encode", "output", "input-wav"); err != nil {
		return err
	}
	m, err := codecModel(c)
	if err != nil {
		return fmt.Errorf("codec encode: %w", err)
	}
	defer m.Close()
	in, out := c.String("input-wav"), c.String("output")
	pcm, err := audio.LoadMono(in, m.Cfg.SampleRate)
	if err != nil {
		return fmt.Errorf("codec encode: %w", err)
	}
	if err := job.UsableAudio(in, pcm, m.Cfg.SampleRate); err != nil {
		return fmt.Errorf("codec encode: %w", err)
	}
	codes := encodeCodes(m, pcm)
	meta := map[string]string{"num_samples": strconv.Itoa(len(pcm)), "sample_rate": strconv.Itoa(m.Cfg.SampleRate)}
	if err := weights.WriteFile(out, []*weights.Tensor{codes}, meta); err != nil {
		return fmt.Errorf("codec encode: %w", err)
	}
	// weights.WriteFile leaves its temporary file's 0600 mode.
	if err := os.Chmod(out, 0o644); err != nil {
		return fmt.Errorf("codec encode: %s: %w", out, fileio.PathErr(err))
	}
	return nil
}

// encodeCodes encodes pcm in frames (the last frame zero-padded, as
// _iterate_audio does), the session's chunk of frames a call (the codes of
// frame-by-frame encoding), into the tensor codes [1, K, frames].
func encodeCodes(m *mimi.Model, pcm []float32) *weights.Tensor {
	fs, K := m.FrameSize(), m.NumCodebooks()
	n := (len(pcm) + fs - 1) / fs
	v := make([]int64, K*n)
	enc := m.NewEncoder()
	chunk := job.CodecFrames(1)
	buf := make([]float32, chunk*fs)
	for f0 := 0; f0 < n; f0 += chunk {
		k := min(chunk, n-f0)
		frames := buf[:k*fs]
		clear(frames)
		copy(frames, pcm[f0*fs:min((f0+k)*fs, len(pcm))])
		codes := enc.Encode(frames)
		for f := range k {
			for q, code := range codes[f*K : (f+1)*K] {
				v[q*n+f0+f] = int64(code)
			}
		}
	}
	return weights.Int64Tensor("codes", []int{1, K, n}, v)
}

func runCodecDecode(c *ucli.Context) error {
	if err := codecArgs(c, "decode", "codes", "output-wav"); err != nil {
		return err
	}
	if err := codecOutputs(c, "decode", "output-wav", "codes"); err != nil {
		return err
	}
	m, err := codecModel(c)
	if err != nil {
		return fmt.Errorf("codec decode: %w", err)
	}
	defer m.Close()
	frames, err := readCodes(c.String("codes"), m)
	if err != nil {
		return fmt.Errorf("codec decode: %w", err)
	}
	dec := m.NewDecoder()
	pcm := make([]float32, 0, len(frames)*m.FrameSize())
	chunk := job.CodecFrames(1)
	var codes []int
	for f0 := 0; f0 < len(frames); f0 += chunk {
		codes = codes[:0]
		for _, f := range frames[f0:min(f0+chunk, len(frames))] {
			codes = append(codes, f...)
		}
		pcm = append(pcm, dec.Decode(codes)...)
	}
	if err := writeWAVFile(c.String("output-wav"), pcm, m.Cfg.SampleRate); err != nil {
		return fmt.Errorf("codec decode: %w", err)
	}
	return nil
}

// readCodes reads the "codes" tensor [1, K, frames] of path, one []int per
// frame, checking K and every code's range.
func readCodes(path string, m *mimi.Model) ([][]int, error) {
	f, err := weights.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !f.Has("codes") {
		return nil, fmt.Errorf("%s: no tensor \"codes\" (not a codes file written by codec encode?)", path)
	}
	t, err := f.Get("codes")
	if err != nil {
		return nil, err
	}
	switch t.DType {
	case weights.I64, weights.I32, weights.I16:
	default:
		return nil, fmt.Errorf("%s: tensor \"codes\" has dtype %s, integer codes (I64) expected", path, t.DType)
	}
	K := m.NumCodebooks()
	if len(t.Shape) != 3 || t.Shape[0] != 1 || t.Shape[1] != K {
		return nil, fmt.Errorf("%s: tensor \"codes\" has shape %v, [1, %d, frames] expected", path, t.Shape, K)
	}
	n := t.Shape[2]
	v := t.Int64s()
	frames := make([][]int, n)
	for i := range frames {
		frames[i] = make([]int, K)
		for k := range frames[i] {
			code := v[k*n+i]
			if code < 0 || code >= int64(m.Cardinality()) {
				return nil, fmt.Errorf("%s: code %d (codebook %d, frame %d) is out of range [0, %d)", path, code, k, i, m.Cardinality())
			}
			frames[i][k] = int(code)
		}
	}
	return frames, nil
}

// writeWAVFile writes pcm as 16-bit PCM, atomically (no partial file).
func writeWAVFile(path string, pcm []float32, rate int) error {
	var b bytes.Buffer
	if err := audio.EncodePCM16(&b, pcm, rate); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return fileio.WriteAtomic(path, b.Bytes())
}

// codecOutputs checks the inputs (regular files) and the output flag's
// file before the codec loads
// (fileio's guard: no input of the run — the checkpoint, the config, the
// input —, no device, FIFO, socket, directory or read-only file, a name
// that fits): a usage error, exit 2.
func codecOutputs(c *ucli.Context, cmd, out string, ins ...string) error {
	paths := []string{c.String("mimi-weight"), c.String("config")}
	for _, f := range ins {
		paths = append(paths, c.String(f))
	}
	for _, p := range paths {
		// A named pipe would block the load: refused, as bad input.
		if _, err := os.Stat(p); err == nil && p != "" {
			if err := fileio.CheckInput(p); err != nil {
				return fmt.Errorf("codec %s: %w", cmd, err)
			}
		}
	}
	if err := fileio.CheckOutputs([]string{c.String(out)}, paths); err != nil {
		return usageErrorf("codec %s: %v", cmd, err)
	}
	return nil
}
