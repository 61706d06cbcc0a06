package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pp-offline/pp-offline/internal/fileio"
)

// guardCases are the bad-input matrix's cases for the output guard and
// the limits, through every command that writes a file: each output over
// an input of the run (the model, the tokenizer, the config, the manifest,
// a voice given by path or by name, the input audio; by another path, a
// hard link or a symbolic link), over a device, a FIFO, a socket, a
// directory or a read-only file, a name too long for its temporary file;
// inputs that are FIFOs (nothing may block); numeric flags out of range.
func guardCases(t *testing.T, src, fifo, dirInput string) []badCase {
	wd, _ := os.Getwd()
	abs := func(p string) string { return filepath.Join(wd, p) }
	model, mimi, tok, cfg := abs(tiny+"model.safetensors"), abs(tiny+"mimi.safetensors"), abs(tiny+"tokenizer.model"), abs(tiny+"config.json")
	voice, input := abs(tiny+"voices/TINYF0.pt"), abs(tiny+"input.wav")
	sock := filepath.Join(src, "sock")
	if l, err := net.Listen("unix", sock); err == nil {
		t.Cleanup(func() { l.Close() })
	} else {
		t.Fatal(err)
	}
	ro := filepath.Join(src, "ro.json")
	os.WriteFile(ro, []byte("keep"), 0o444)
	roPT := filepath.Join(src, "ro.pt")
	os.WriteFile(roPT, []byte("keep"), 0o444)
	fifoPT := filepath.Join(src, "fifo.pt")
	mkfifo(fifoPT)
	long := strings.Repeat("n", 240)
	modelFlags := []string{"--config", cfg, "--moshi-weight", model, "--mimi-weight", mimi, "--tokenizer", tok, "--device", "cpu"}

	// batch with a one-line manifest (its fields: key, value pairs; paths
	// relative to the case's folder), plus flags.
	batch := func(fields []string, flags ...string) func(dir, out string) []string {
		return func(dir, out string) []string {
			kv := map[string]string{"input_wav": input, "output_wav": filepath.Join(out, "a.wav"), "output_text": filepath.Join(out, "a.json"), "voice_prompt": voice}
			for i := 0; i+1 < len(fields); i += 2 {
				kv[fields[i]] = strings.ReplaceAll(strings.ReplaceAll(fields[i+1], "$OUT", out), "$DIR", dir)
			}
			var parts []string
			for k, v := range kv {
				if strings.HasPrefix(v, "#") { // a raw JSON value
					parts = append(parts, fmt.Sprintf("%q: %s", k, v[1:]))
				} else {
					parts = append(parts, fmt.Sprintf("%q: %q", k, v))
				}
			}
			m := filepath.Join(dir, "jobs.jsonl")
			os.WriteFile(m, []byte("{"+strings.Join(parts, ", ")+"}\n"), 0o644)
			args := append([]string{"batch", "--manifest", m, "--greedy", "--voice-prompt-dir", abs(tiny + "voices")}, modelFlags...)
			for _, f := range flags {
				args = append(args, strings.ReplaceAll(strings.ReplaceAll(f, "$OUT", out), "$DIR", dir))
			}
			return args
		}
	}
	report := func(p string) func(dir, out string) []string { return batch(nil, "--report", p) }
	link := func(target, name string) func(dir string) string {
		return func(dir string) string {
			p := filepath.Join(dir, name)
			os.Symlink(target, p)
			return p
		}
	}
	with := func(setup func(dir string) string, f func(p string) func(dir, out string) []string) func(dir, out string) []string {
		return func(dir, out string) []string { return f(setup(dir))(dir, out) }
	}
	quantize := func(output string) func(dir, out string) []string {
		return func(dir, out string) []string {
			return []string{"quantize", "--moshi-weight", model, "--format", "q8_0", "--output", strings.ReplaceAll(output, "$OUT", out)}
		}
	}
	voiceCmd := func(output string) func(dir, out string) []string {
		return func(dir, out string) []string {
			return append([]string{"voice", "--input-wav", input, "--output", strings.ReplaceAll(output, "$OUT", out)}, modelFlags...)
		}
	}
	encode := func(in, output string) func(dir, out string) []string {
		return func(dir, out string) []string {
			return []string{"codec", "encode", "--config", cfg, "--mimi-weight", mimi, "--input-wav", in, "--output", strings.ReplaceAll(output, "$OUT", out)}
		}
	}
	decode := func(codes, output string) func(dir, out string) []string {
		return func(dir, out string) []string {
			return []string{"codec", "decode", "--config", cfg, "--mimi-weight", mimi, "--codes", codes, "--output-wav", strings.ReplaceAll(output, "$OUT", out)}
		}
	}
	cmp := func(flags ...string) func(dir, out string) []string {
		return func(dir, out string) []string {
			args := []string{"compare", "--reference", input, "--candidate", input}
			for _, f := range flags {
				args = append(args, strings.ReplaceAll(strings.ReplaceAll(f, "$OUT", out), "$DIR", dir))
			}
			return args
		}
	}
	cmpDirs := func(flag, where string) func(dir, out string) []string {
		return func(dir, out string) []string {
			ref, cand := filepath.Join(dir, "ref"), filepath.Join(dir, "cand")
			for _, d := range []string{ref, cand} {
				os.Mkdir(d, 0o755)
				b, _ := os.ReadFile(input)
				os.WriteFile(filepath.Join(d, "a.wav"), b, 0o644)
			}
			p := strings.ReplaceAll(strings.ReplaceAll(where, "$REF", ref), "$CAND", cand)
			if strings.Contains(where, "$LINK") {
				os.Symlink(ref, filepath.Join(dir, "reflink"))
				p = filepath.Join(dir, "reflink", "r.json")
			}
			return []string{"compare", "--reference", ref, "--candidate", cand, flag, p}
		}
	}
	randomWeights := func(setup func(dir, out string) []string) func(dir, out string) []string {
		return func(dir, out string) []string {
			return append([]string{"random-weights", "--config", cfg}, setup(dir, out)...)
		}
	}
	main := func(flag, value string) func(dir, out string) []string {
		return func(dir, out string) []string {
			return setFlag(tinyArgs(out, "--greedy"), flag, strings.ReplaceAll(strings.ReplaceAll(value, "$OUT", out), "$DIR", dir))
		}
	}

	benchArgs := func(flags ...string) func(dir, out string) []string {
		return func(dir, out string) []string { return append([]string{"bench", "--config", cfg}, flags...) }
	}
	cases := []badCase{
		// batch --report over each input, a device, a FIFO, a socket, …
		{name: "batch report is the model", args: report(model), code: 2, want: "--moshi-weight", names: "model.safetensors"},
		{name: "batch report is the tokenizer", args: report(tok), code: 2, want: "--tokenizer", names: "tokenizer.model"},
		{name: "batch report is the config", args: report(cfg), code: 2, want: "--config", names: "config.json"},
		{name: "batch report is the mimi weights", args: report(mimi), code: 2, want: "--mimi-weight", names: "mimi.safetensors"},
		{name: "batch report is the manifest", args: report("$DIR/jobs.jsonl"), code: 2, want: "is the manifest", names: "jobs.jsonl"},
		{name: "batch report is the voice", args: report(voice), code: 2, want: "never written over inputs", names: "TINYF0.pt"},
		{name: "batch report is the input", args: report(input), code: 2, want: "input_wav", names: "input.wav"},
		{name: "batch report links the model", args: with(link(model, "r.json"), report), code: 2, want: "--moshi-weight", names: "r.json"},
		{name: "batch report is a device", args: report("/dev/null"), code: 2, want: "a device", names: "/dev/null"},
		{name: "batch report is a FIFO", args: report(fifo), code: 2, want: "a named pipe", names: "fifo.wav"},
		{name: "batch report is a socket", args: report(sock), code: 2, want: "a socket", names: "sock"},
		{name: "batch report is read-only", args: report(ro), code: 2, want: "read-only", names: "ro.json"},
		{name: "batch report is a directory", args: report(dirInput), code: 2, want: "a directory", names: "adir"},
		{name: "batch report folder missing", args: report("$DIR/no/r.json"), code: 2, want: "does not exist", names: "r.json"},
		{name: "batch report name too long", args: report("$OUT/" + long + ".json"), code: 2, want: "the file name is", names: "nnnn"},
		{name: "batch report of another shard", args: func(dir, out string) []string {
			r := filepath.Join(dir, "report.json")
			os.WriteFile(r, []byte(`{"shard": "1/2", "items": []}`), 0o644)
			return batch(nil, "--report", r, "--shard", "0/2")(dir, out)
		}, code: 2, want: "holds the report of shard 1/2", names: "report.json"},
		{name: "batch report held by another shard", args: func(dir, out string) []string {
			r := filepath.Join(out, "report.json") // the case's hold stays in out (allowed)
			l, err := fileio.LockOutputs(r)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Unlock)
			return batch(nil, "--report", r, "--shard", "1/2")(dir, out)
		}, code: 2, want: "another pp-offline run is writing", names: "report.json"},
		// batch item outputs.
		{name: "batch output is the manifest", args: batch([]string{"output_wav", "$DIR/jobs.jsonl"}), code: 2, want: "is the manifest", names: "jobs.jsonl"},
		{name: "batch output is the voice by name", args: batch([]string{"voice_prompt", "TINYF0.pt", "output_text", voice}), code: 2, want: "input", names: "TINYF0.pt"},
		{name: "batch output is the voice by path", args: batch([]string{"output_text", voice}), code: 2, want: "voice_prompt", names: "TINYF0.pt"},
		{name: "batch output is the model", args: batch([]string{"output_wav", model}), code: 2, want: "--moshi-weight", names: "model.safetensors"},
		{name: "batch output links the tokenizer", args: with(link(tok, "t.json"), func(p string) func(dir, out string) []string { return batch([]string{"output_text", p}) }), code: 2, want: "--tokenizer", names: "t.json"},
		{name: "batch output is the input", args: batch([]string{"output_wav", input}), code: 2, want: "input_wav", names: "input.wav"},
		{name: "batch output is a device", args: batch([]string{"output_wav", "/dev/null"}), code: 2, want: "a device", names: "/dev/null"},
		{name: "batch output is a FIFO", args: batch([]string{"output_wav", fifo}), code: 2, want: "a named pipe", names: "fifo.wav"},
		{name: "batch output is a socket", args: batch([]string{"output_text", sock}), code: 2, want: "a socket", names: "sock"},
		{name: "batch output is read-only", args: batch([]string{"output_text", ro}), code: 2, want: "read-only", names: "ro.json"},
		{name: "batch output is a directory", args: batch([]string{"output_wav", dirInput}), code: 2, want: "", names: "adir"},
		{name: "batch output name too long", args: batch([]string{"output_wav", "$OUT/" + long + ".wav"}), code: 2, want: "the file name is", names: "nnnn"},
		{name: "batch outputs the same", args: batch([]string{"output_text", "$OUT/a.wav"}), code: 2, want: "same file", names: "a.wav"},
		// batch inputs that would block, and bounds.
		{name: "batch input is a FIFO", args: batch([]string{"input_wav", fifo}), code: 2, want: "is a pipe", names: "fifo.wav"},
		{name: "batch voice is a FIFO", args: batch([]string{"voice_prompt", fifoPT}), code: 2, want: "is a pipe", names: "fifo.pt"},
		{name: "batch manifest is a FIFO", args: func(dir, out string) []string {
			return append([]string{"batch", "--manifest", fifo}, modelFlags...)
		}, code: 2, want: "is a pipe", names: "fifo.wav"},
		{name: "batch input dir of FIFO links", args: func(dir, out string) []string {
			in := filepath.Join(dir, "in")
			os.Mkdir(in, 0o755)
			os.Symlink(fifo, filepath.Join(in, "a.wav"))
			return append([]string{"batch", "--input-dir", in, "--output-dir", out, "--voice-prompt", "TINYF0.pt"}, modelFlags...)
		}, code: 2, want: "no audio files the reader takes", names: "in"},
		{name: "batch input dir missing", args: func(dir, out string) []string {
			return append([]string{"batch", "--input-dir", dir + "/nope", "--output-dir", out, "--voice-prompt", "TINYF0.pt"}, modelFlags...)
		}, code: 2, want: "no such file", names: "nope"},
		{name: "batch input dir is a file", args: func(dir, out string) []string {
			return append([]string{"batch", "--input-dir", input, "--output-dir", out, "--voice-prompt", "TINYF0.pt"}, modelFlags...)
		}, code: 2, want: "not a directory", names: "input.wav"},
		{name: "batch batch-size 2^63-1", args: batch(nil, "--batch-size", "9223372036854775807"), code: 2, want: "--batch-size must be from 1 to"},
		{name: "batch batch-size 2^62", args: batch(nil, "--batch-size", "4611686018427387904"), code: 2, want: "--batch-size must be from 1 to"},
		{name: "batch batch-size 2^60", args: batch(nil, "--batch-size", "1152921504606846976"), code: 2, want: "--batch-size must be from 1 to"},
		{name: "batch batch-size 0", args: batch(nil, "--batch-size", "0"), code: 2, want: "--batch-size"},
		{name: "batch batch-size negative", args: batch(nil, "--batch-size", "-3"), code: 2, want: "--batch-size"},
		{name: "batch prompt-cache negative", args: batch(nil, "--prompt-cache", "-1"), code: 2, want: "--prompt-cache must be from 0 to 64, not -1"},
		{name: "batch prompt-cache 2^62", args: batch(nil, "--prompt-cache", "4611686018427387904"), code: 2, want: "--prompt-cache must be from 0 to 64"},
		{name: "batch topk-audio 0", args: batch(nil, "--topk-audio", "0"), code: 2, want: "--topk-audio"},
		{name: "batch temp-text negative", args: batch(nil, "--temp-text", "-1"), code: 2, want: "--temp-text"},
		{name: "batch seed -2", args: batch(nil, "--seed", "-2"), code: 2, want: "--seed"},
		{name: "batch manifest topk_audio 0", args: batch([]string{"topk_audio", "#0"}), code: 2, want: "topk_audio", names: "jobs.jsonl"},
		{name: "batch manifest topk_text 0", args: batch([]string{"topk_text", "#0"}), code: 2, want: "topk_text", names: "jobs.jsonl"},
		{name: "batch manifest temp_audio negative", args: batch([]string{"temp_audio", "#-0.5"}), code: 2, want: "temp_audio", names: "jobs.jsonl"},
		{name: "batch manifest seed -7", args: batch([]string{"seed", "#-7"}), code: 2, want: "seed", names: "jobs.jsonl"},
		{name: "batch shard out of range", args: batch(nil, "--shard", "5/4"), code: 2, want: "--shard"},
		{name: "batch shard-count negative", args: batch(nil, "--shard-count", "-1"), code: 2, want: "--shard-count"},
		{name: "batch shard-count huge", args: batch(nil, "--shard-count", "9223372036854775807"), code: 2, want: "--shard-count"},
		// quantize.
		{name: "quantize over its input", args: quantize(model), code: 2, want: "input", names: "model.safetensors"},
		{name: "quantize over its input, another path", args: quantize("./" + tiny + "model.safetensors"), code: 2, want: "input", names: "model.safetensors"},
		{name: "quantize over a link to its input", args: with(link(model, "q.safetensors"), func(p string) func(dir, out string) []string { return quantize(p) }), code: 2, want: "is the input", names: "q.safetensors"},
		{name: "quantize over a device", args: quantize("/dev/null"), code: 2, want: "a device", names: "/dev/null"},
		{name: "quantize over a FIFO", args: quantize(fifo), code: 2, want: "a named pipe", names: "fifo.wav"},
		{name: "quantize over a socket", args: quantize(sock), code: 2, want: "a socket", names: "sock"},
		{name: "quantize over a read-only file", args: quantize(ro), code: 2, want: "read-only", names: "ro.json"},
		{name: "quantize output folder missing", args: quantize("$OUT/no/q.safetensors"), code: 2, want: "does not exist", names: "q.safetensors"},
		{name: "quantize output name too long", args: quantize("$OUT/" + long + ".st"), code: 2, want: "the file name is", names: "nnnn"},
		{name: "quantize input is a FIFO", args: func(dir, out string) []string {
			return []string{"quantize", "--moshi-weight", fifo, "--format", "q8_0", "--output", filepath.Join(out, "q.st")}
		}, code: 1, want: "is a pipe", names: "fifo.wav"},
		// voice.
		{name: "voice over a link to the model", args: with(link(model, "m.pt"), voiceCmd), code: 2, want: "is the input", names: "m.pt"},
		{name: "voice over a link to the sample", args: with(link(input, "i.pt"), voiceCmd), code: 2, want: "is the input", names: "i.pt"},
		{name: "voice over a link to the tokenizer", args: with(link(tok, "t.pt"), voiceCmd), code: 2, want: "is the input", names: "t.pt"},
		{name: "voice over a FIFO", args: voiceCmd(fifoPT), code: 2, want: "a named pipe", names: "fifo.pt"},
		{name: "voice over a read-only file", args: voiceCmd(roPT), code: 2, want: "read-only", names: "ro.pt"},
		{name: "voice output name too long", args: voiceCmd("$OUT/" + long + ".pt"), code: 2, want: "the file name is", names: "nnnn"},
		{name: "voice output folder missing", args: voiceCmd("$OUT/no/v.pt"), code: 2, want: "does not exist", names: "v.pt"},
		{name: "voice sample is a FIFO", args: func(dir, out string) []string {
			return append([]string{"voice", "--input-wav", fifo, "--output", filepath.Join(out, "v.pt")}, modelFlags...)
		}, code: 1, want: "is a pipe", names: "fifo.wav"},
		// codec.
		{name: "codec encode over its checkpoint", args: encode(input, mimi), code: 2, want: "input", names: "mimi.safetensors"},
		{name: "codec encode over its input", args: encode(input, input), code: 2, want: "input", names: "input.wav"},
		{name: "codec encode over the config", args: encode(input, cfg), code: 2, want: "input", names: "config.json"},
		{name: "codec encode over a device", args: encode(input, "/dev/null"), code: 2, want: "a device", names: "/dev/null"},
		{name: "codec encode over a FIFO", args: encode(input, fifo), code: 2, want: "a named pipe", names: "fifo.wav"},
		{name: "codec encode over a read-only file", args: encode(input, ro), code: 2, want: "read-only", names: "ro.json"},
		{name: "codec encode input is a FIFO", args: encode(fifo, "$OUT/c.st"), code: 1, want: "is a pipe", names: "fifo.wav"},
		{name: "codec decode over its codes", args: with(func(dir string) string {
			p := filepath.Join(dir, "codes.safetensors")
			b, _ := os.ReadFile(mimi)
			os.WriteFile(p, b, 0o644)
			return p
		}, func(p string) func(dir, out string) []string { return decode(p, p) }), code: 2, want: "input", names: "codes.safetensors"},
		{name: "codec decode over a link to the checkpoint", args: with(link(mimi, "o.wav"), func(p string) func(dir, out string) []string { return decode(model, p) }), code: 2, want: "is the input", names: "o.wav"},
		{name: "codec decode over a socket", args: decode(model, sock), code: 2, want: "a socket", names: "sock"},
		{name: "codec decode codes are a FIFO", args: decode(fifo, "$OUT/o.wav"), code: 1, want: "is a pipe", names: "fifo.wav"},
		{name: "codec decode mimi weights are a FIFO", args: func(dir, out string) []string {
			return []string{"codec", "decode", "--config", cfg, "--mimi-weight", fifo, "--codes", model, "--output-wav", filepath.Join(out, "o.wav")}
		}, code: 1, want: "is a pipe", names: "fifo.wav"},
		// compare.
		{name: "compare report over the reference", args: cmp("--report", input), code: 2, want: "input", names: "input.wav"},
		{name: "compare junit over a link to the candidate", args: with(link(input, "j.xml"), func(p string) func(dir, out string) []string { return cmp("--junit", p) }), code: 2, want: "is the input", names: "j.xml"},
		{name: "compare plot over the reference text", args: func(dir, out string) []string {
			txt := filepath.Join(dir, "ref.json")
			os.WriteFile(txt, []byte(`["a"]`), 0o644)
			return cmp("--reference-text", txt, "--candidate-text", txt, "--plot", txt)(dir, out)
		}, code: 2, want: "input", names: "ref.json"},
		{name: "compare report is a device", args: cmp("--report", "/dev/null"), code: 2, want: "a device", names: "/dev/null"},
		{name: "compare junit is a FIFO", args: cmp("--junit", fifo), code: 2, want: "a named pipe", names: "fifo.wav"},
		{name: "compare plot is a socket", args: cmp("--plot", sock), code: 2, want: "a socket", names: "sock"},
		{name: "compare report is read-only", args: cmp("--report", ro), code: 2, want: "read-only", names: "ro.json"},
		{name: "compare report is a directory", args: cmp("--report", dirInput), code: 2, want: "a directory", names: "adir"},
		{name: "compare report name too long", args: cmp("--report", "$OUT/"+long+".json"), code: 2, want: "the file name is", names: "nnnn"},
		{name: "compare junit into the reference tree", args: cmpDirs("--junit", "$REF/j.xml"), code: 2, want: "inside the reference directory", names: "j.xml"},
		{name: "compare report into the candidate tree", args: cmpDirs("--report", "$CAND/sub/../r.json"), code: 2, want: "inside the candidate directory", names: "r.json"},
		{name: "compare report into the reference tree by a link", args: cmpDirs("--report", "$LINK"), code: 2, want: "inside the reference directory", names: "r.json"},
		{name: "compare reference is a FIFO", args: func(dir, out string) []string {
			return []string{"compare", "--reference", fifo, "--candidate", input}
		}, code: 2, want: "is a pipe", names: "fifo.wav"},
		// random-weights.
		{name: "random-weights over its tokenizer", args: randomWeights(func(dir, out string) []string {
			p := filepath.Join(out, "tokenizer.model")
			b, _ := os.ReadFile(tok)
			os.WriteFile(p, b, 0o644)
			return []string{"--tokenizer", p, "--output", out}
		}), code: 2, want: "is an input", names: "tokenizer.model"},
		{name: "random-weights over a read-only model", args: randomWeights(func(dir, out string) []string {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("keep"), 0o444)
			return []string{"--tokenizer", tok, "--output", dir}
		}), code: 2, want: "read-only", names: "model.safetensors"},
		{name: "random-weights over a FIFO config", args: randomWeights(func(dir, out string) []string {
			mkfifo(filepath.Join(dir, "config.json"))
			return []string{"--tokenizer", tok, "--output", dir}
		}), code: 2, want: "a named pipe", names: "config.json"},
		{name: "random-weights tokenizer is a FIFO", args: randomWeights(func(dir, out string) []string {
			return []string{"--tokenizer", fifo, "--output", out}
		}), code: 1, want: "is a pipe", names: "fifo.wav"},
		// The main job: more targets and inputs that would block.
		{name: "output is a FIFO", args: main("--output-wav", fifo), code: 2, want: "a named pipe", names: "fifo.wav"},
		{name: "output is a socket", args: main("--output-text", sock), code: 2, want: "a socket", names: "sock"},
		{name: "output is the config", args: main("--output-text", tiny+"config.json"), code: 2, want: "input", names: "config.json"},
		{name: "output is the voice by name", args: main("--output-text", tiny+"voices/TINYF0.pt"), code: 2, want: "input", names: "TINYF0.pt"},
		{name: "output name too long", args: main("--output-wav", "$OUT/"+long+".wav"), code: 2, want: "the file name is", names: "nnnn"},
		{name: "model is a FIFO", args: main("--moshi-weight", fifo), code: 1, want: "is a pipe", names: "fifo.wav"},
		{name: "mimi is a FIFO", args: main("--mimi-weight", fifo), code: 1, want: "is a pipe", names: "fifo.wav"},
		// bench: numbers bounded before they size anything.
		{name: "bench cpuprofile over the model", args: func(dir, out string) []string {
			return []string{"bench", "--config", cfg, "--moshi-weight", model, "--mimi-weight", mimi, "--frames", "1", "--cpuprofile", model}
		}, code: 2, want: "input", names: "model.safetensors"},
		{name: "bench frames 2^63-1", args: benchArgs("--frames", "9223372036854775807"), code: 2, want: "--frames + --warmup + --kv-fill"},
		{name: "bench kv-fill 2^62", args: benchArgs("--kv-fill", "4611686018427387904"), code: 2, want: "--frames + --warmup + --kv-fill"},
		{name: "bench warmup+frames overflow", args: benchArgs("--warmup", "4611686018427387904", "--frames", "4611686018427387904"), code: 2, want: "--frames + --warmup + --kv-fill"},
		{name: "bench batch-size 2^63-1", args: benchArgs("--batch-size", "9223372036854775807"), code: 2, want: "--batch-size must be from 1 to"},
		{name: "bench batch-size 4096 7B", args: func(dir, out string) []string {
			return []string{"bench", "--config", "testdata/personaplex-7b.config.json", "--batch-size", "4096", "--frames", "1"}
		}, code: 1, want: "not enough memory"},
		{name: "bench memory-mib 2^63-1", args: benchArgs("--memory-mib", "9223372036854775807"), code: 2, want: "--memory-mib must be from 1 to"},
		{name: "bench threads 2^63-1", args: benchArgs("--threads", "9223372036854775807"), code: 2, want: "--threads must be at most"},
		{name: "tune frames 2^63-1", args: func(dir, out string) []string {
			return []string{"tune", "--config", cfg, "--frames", "9223372036854775807"}
		}, code: 2, want: "--frames + --warmup must be at most"},
		{name: "tune sim warmup 2^63-1", args: func(dir, out string) []string {
			return []string{"tune", "--device", "sim", "--config", cfg, "--warmup", "9223372036854775807"}
		}, code: 2, want: "--frames + --warmup must be at most"},
		{name: "threads 2^63-1", args: main("--threads", "9223372036854775807"), code: 2, want: "--threads must be from 0"},
		// download, offline: an empty cache is one line, nothing written.
		{name: "download offline, empty cache", args: func(dir, out string) []string {
			return []string{"download", "--hf-repo", "nvidia/personaplex-7b-v1"}
		}, code: 1, want: ""},
		{name: "download unexpected argument", args: func(dir, out string) []string {
			return []string{"download", "extra"}
		}, code: 2, want: "unexpected argument"}, // a usage error, as README says for every command
	}
	badCaseEnv["download offline, empty cache"] = []string{"HF_HUB_OFFLINE=1", "HF_HOME=" + filepath.Join(src, "hf-empty")}
	return cases
}

// An input named like a temporary file of an output (the old
// ".NAME.tmp<digits>" pattern, beside the output) is read, never swept:
// the item runs and the input is still there, byte for byte.
func TestBatchKeepsInputsNamedLikeTemporaries(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	in := filepath.Join(out, ".a.wav.tmp5")
	writeClip(t, in, 1920*3)
	before, _ := os.ReadFile(in)
	vb, _ := os.ReadFile(tiny + "input.wav") // a WAV voice prompt, named like a temporary
	voice := filepath.Join(out, ".a.json.tmp7")
	os.WriteFile(voice, vb, 0o644)
	m := filepath.Join(dir, "jobs.jsonl")
	os.WriteFile(m, []byte(fmt.Sprintf(`{"input_wav": %q, "output_wav": "out/a.wav", "output_text": "out/a.json", "voice_prompt": %q, "greedy": true}`+"\n", in, "./out/.a.json.tmp7")), 0o644)
	_, stderr, code := run(t, batchArgs("--manifest", m)...)
	if code != 0 || strings.Contains(stderr, "removed") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	after, err := os.ReadFile(in)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the input was touched: %v", err)
	}
	if b, err := os.ReadFile(voice); err != nil || !bytes.Equal(b, vb) {
		t.Fatalf("the voice was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "a.json")); err != nil {
		t.Fatal("no output")
	}
	if _, err := os.Stat(filepath.Join(out, fileio.TempDir)); err == nil {
		t.Fatal("temporary folder left")
	}
}

// --input-dir as a link to a folder (no trailing slash) runs its files;
// an output folder inside the input folder reached by another path is not
// read as input, so a rerun skips everything instead of exiting 2.
func TestBatchInputDirLinks(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	os.MkdirAll(real, 0o755)
	writeClip(t, filepath.Join(real, "a.wav"), 1920*2)
	link := filepath.Join(base, "in")
	os.Symlink(real, link)
	res := filepath.Join(real, "res")
	os.Mkdir(res, 0o755)
	outLink := filepath.Join(base, "out")
	os.Symlink(res, outLink)
	args := batchArgs("--input-dir", link, "--output-dir", outLink, "--recursive", "--greedy")
	for i, want := range []string{"done: 1 ok", "done: 0 ok, 1 skipped"} {
		_, stderr, code := run(t, args...)
		if code != 0 || !strings.Contains(stderr, want) {
			t.Fatalf("run %d: exit %d:\n%s", i, code, stderr)
		}
	}
}

// SIGKILL at random points of a batch, 20 times: each rerun finishes the
// job, and the outputs equal a clean run byte for byte, with nothing
// half-written and no temporary file or lock left.
func TestBatchSIGKILLAtRandomPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("20 killed batches")
	}
	const n, trials = 3, 20
	manifest, _, want := longJob(t, n, 3)
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range trials {
		out := filepath.Join(t.TempDir(), "out")
		args := batchArgs("--manifest", manifest, "--output-dir", out, "--batch-size", "1", "-q")
		cmd := exec.Command(binPath, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// From before the model loads to the last item's write.
		time.Sleep(time.Duration(rng.IntN(2500)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		for _, p := range outputsOf(t, out) {
			if strings.HasPrefix(filepath.Base(p), "in") && !strings.Contains(p, fileio.TempDir) {
				b, _ := os.ReadFile(filepath.Join(out, p))
				idx := 0
				if strings.HasSuffix(p, ".json") {
					idx = 1
				}
				if !bytes.Equal(b, want[idx]) {
					t.Fatalf("trial %d: %s half-written after the kill", trial, p)
				}
			}
		}
		if _, stderr, code := run(t, args...); code != 0 {
			t.Fatalf("trial %d: resume exit %d:\n%s", trial, code, stderr)
		}
		checkAllOutputs(t, out, n, want)
		if _, err := os.Stat(filepath.Join(out, fileio.TempDir)); err == nil {
			t.Fatalf("trial %d: temporary folder left after the resume", trial)
		}
	}
}
