package job

import (
	"time"

	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/mimi"
)

// Session is a lockstep batch of conversations over one loaded LM (and,
// for conversations with audio, one codec): the only place that wires a
// frame. Each Step runs, for every member at once, the codec's encoder over
// the frame's user audio, one LM step (prefills of members that just joined
// in the same pass) and the codec's decoder over the frames the LM produced.
// RunItems (the job), Bench and tune drive it; members join and leave
// between steps. A Session is used from one goroutine.
type Session struct {
	eng   *lm.Engine
	codec *mimi.Model // nil: the members give codes (an LM-only session)
	batch *mimi.Batch
	frame int // samples per frame
	nq    int // the codec's codebooks

	members []*Conversation

	// The codec streams of members that left, reset for the next ones
	// that join (their buffers and KV rings already allocated).
	spare []streams

	// Per-step views, reused.
	gens    []*lm.Gen
	ins     []lm.Input
	encs    []*mimi.Encoder
	pcms    [][]float32
	codes   [][]int
	decs    []*mimi.Decoder
	outs    [][]int
	dpcm    [][]float32
	owners  []*Conversation
	texts   []int
	bufs    [][]float32
	encoded []*Conversation
}

// Conversation is one member of a Session: its LM generator, its codec
// streams and where its frames come from and go to.
type Conversation struct {
	Gen *lm.Gen
	// Audio fills dst with the user audio of frame f (zero past its end);
	// nil with Codes set.
	Audio func(f int, dst []float32)
	// Codes gives the user's codebook tokens of frame f without the codec
	// (tune's LM-only session); used when Audio is nil.
	Codes func(f int) []int
	// Frames is how many frames the conversation runs before it leaves
	// (0: until the caller removes it).
	Frames int
	// Output receives each frame the LM generates: its text token and the
	// decoded agent audio (nil in an LM-only session). The slice is the
	// session's: copy what you keep.
	Output func(text int, pcm []float32)

	enc *mimi.Encoder
	dec *mimi.Decoder
	f   int // frames stepped
}

// Done is the number of frames the conversation has been stepped.
func (c *Conversation) Done() int { return c.f }

// NewSession is a session on eng, with codec for members that give audio
// (nil for an LM-only session).
func NewSession(eng *lm.Engine, codec *mimi.Model) *Session {
	s := &Session{eng: eng, codec: codec}
	if codec != nil {
		s.batch = codec.NewBatch()
		s.frame = codec.FrameSize()
		s.nq = codec.Cfg.NumCodebooks
	}
	return s
}

// streams are one conversation's codec streams.
type streams struct {
	enc *mimi.Encoder
	dec *mimi.Decoder
}

// Join adds a conversation; it runs from the next Step. A conversation
// with Audio gets fresh codec streams: new, or those of a member that left,
// reset (Encoder.Reset and Decoder.Reset make them as new).
func (s *Session) Join(c *Conversation) {
	if c.Audio != nil && s.codec != nil {
		if k := len(s.spare); k > 0 {
			c.enc, c.dec = s.spare[k-1].enc, s.spare[k-1].dec
			s.spare = s.spare[:k-1]
			c.enc.Reset()
			c.dec.Reset()
		} else {
			c.enc, c.dec = s.codec.NewEncoder(), s.codec.NewDecoder()
		}
	}
	c.f = 0
	s.members = append(s.members, c)
}

// Len is the number of members.
func (s *Session) Len() int { return len(s.members) }

// StepTimes is how long each phase of a Step took.
type StepTimes struct {
	Encode, LM, Decode time.Duration
	// Outputs is the number of members that got a frame from the LM.
	Outputs int
}

// Step runs one frame for every member and returns the members whose
// Frames are done (they have left the session), in join order. An error
// is the engine's (an offload failure, the context cancelled): the
// session is then unusable.
func (s *Session) Step() (left []*Conversation, t StepTimes, err error) {
	n := len(s.members)
	if n == 0 {
		return nil, t, nil
	}
	s.gens, s.ins = s.gens[:0], s.ins[:0]
	s.encs, s.pcms, s.encoded = s.encs[:0], s.pcms[:0], s.encoded[:0]
	for len(s.bufs) < n {
		s.bufs = append(s.bufs, make([]float32, s.frame))
	}
	for len(s.codes) < n {
		s.codes = append(s.codes, nil)
	}
	for i, c := range s.members {
		s.gens = append(s.gens, c.Gen)
		if c.Audio != nil {
			buf := s.bufs[i]
			clear(buf)
			c.Audio(c.f, buf)
			s.encs, s.pcms, s.encoded = append(s.encs, c.enc), append(s.pcms, buf), append(s.encoded, c)
		}
	}
	t0 := time.Now()
	if len(s.encs) > 0 {
		s.batch.Encode(s.encs, s.pcms, s.codes[:len(s.encs)])
	}
	t1 := time.Now()
	k := 0
	for _, c := range s.members {
		if c.Audio != nil {
			s.ins = append(s.ins, lm.Input{User: s.codes[k]})
			k++
		} else {
			s.ins = append(s.ins, lm.Input{User: c.Codes(c.f)})
		}
	}
	if err := s.eng.Step(s.gens, s.ins); err != nil {
		return nil, t, err
	}
	if err := s.eng.Err(); err != nil {
		return nil, t, err
	}
	t2 := time.Now()
	s.decs, s.outs, s.owners, s.texts = s.decs[:0], s.outs[:0], s.owners[:0], s.texts[:0]
	for _, c := range s.members {
		out, ok := c.Gen.Output()
		if !ok {
			continue
		}
		t.Outputs++
		if c.dec == nil {
			if c.Output != nil {
				c.Output(out[0], nil)
			}
			continue
		}
		s.decs, s.outs, s.owners = append(s.decs, c.dec), append(s.outs, out[1:1+s.nq]), append(s.owners, c)
		s.texts = append(s.texts, out[0])
	}
	for len(s.dpcm) < len(s.decs) {
		s.dpcm = append(s.dpcm, nil)
	}
	if len(s.decs) > 0 {
		s.batch.Decode(s.decs, s.outs, s.dpcm[:len(s.decs)])
	}
	t3 := time.Now()
	for i, c := range s.owners {
		if c.Output != nil {
			c.Output(s.texts[i], s.dpcm[i])
		}
	}
	t.Encode, t.LM, t.Decode = t1.Sub(t0), t2.Sub(t1), t3.Sub(t2)
	kept := s.members[:0]
	for _, c := range s.members {
		c.f++
		if c.Frames > 0 && c.f >= c.Frames {
			left = append(left, c)
			if c.enc != nil {
				s.spare = append(s.spare, streams{c.enc, c.dec})
				c.enc, c.dec = nil, nil
			}
			continue
		}
		kept = append(kept, c)
	}
	clear(s.members[len(kept):])
	s.members = kept
	return left, t, nil
}
