package job

import (
	"testing"

	"github.com/pp-offline/pp-offline/infer/lm"
)

// The codec codes chunks of CodecFrames(the most members the session has
// had) frames: a conversation left alone at the end of a batch keeps the
// chunk size of the batch (its buffers do not grow), every conversation
// gets all its frames, in order, the last ones as it leaves, and a
// conversation's audio is asked for each frame once, ahead of its step.
func TestSessionCodecChunks(t *testing.T) {
	o := tinyOptions(t).withDefaults()
	lengths := []int{2, 3, 20}
	d, err := OpenDevice(o.Device, JobShape{Config: o.Config, BatchSize: len(lengths), MoshiWeight: o.MoshiWeight, MimiWeight: o.MimiWeight}, nopLog{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	codec, model, err := loadModels(o, d)
	if err != nil {
		t.Fatal(err)
	}
	defer codec.Close()
	defer model.Close()
	w, err := d.Place(model, len(lengths))
	if err != nil {
		t.Fatal(err)
	}
	eng := lm.NewEngine(model, d.Backend(), w)
	s := NewSession(eng, codec)
	step := 0
	asked := make([]map[int][]int, len(lengths)) // step → frames asked for
	outs := make([]int, len(lengths))
	for i, n := range lengths {
		g := eng.NewGen(lm.GenOptions{FrameRate: o.Config.Mimi.FrameRate})
		g.StepSilence() // every step then gives a frame
		asked[i] = map[int][]int{}
		s.Join(&Conversation{Gen: g, Frames: n,
			Audio: func(f int, dst []float32) {
				if f < step {
					t.Errorf("conversation %d: audio of frame %d asked at step %d", i, f, step)
				}
				asked[i][step] = append(asked[i][step], f)
			},
			Output: func(text int, pcm []float32) {
				if len(pcm) != codec.FrameSize() {
					t.Errorf("conversation %d: output of %d samples", i, len(pcm))
				}
				outs[i]++
			}})
	}
	chunk := CodecFrames(len(lengths))
	for s.Len() > 0 {
		left, _, err := s.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range left {
			if c.Done() != c.Frames {
				t.Errorf("left after %d of %d frames", c.Done(), c.Frames)
			}
		}
		step++
	}
	for i, n := range lengths {
		if outs[i] != n {
			t.Errorf("conversation %d: %d frames output of %d", i, outs[i], n)
		}
		next := 0
		for st := 0; st < n; st++ {
			fs, ok := asked[i][st]
			if st%chunk != 0 {
				if ok {
					t.Errorf("conversation %d: audio asked at step %d, inside a chunk of %d", i, st, chunk)
				}
				continue
			}
			if want := min(chunk, n-st); len(fs) != want || fs[0] != next || fs[len(fs)-1] != next+want-1 {
				t.Errorf("conversation %d, step %d: frames %v asked, want %d from %d", i, st, fs, want, next)
			}
			next += len(fs)
		}
	}
}
