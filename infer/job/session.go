package job

import (
	"time"

	"github.com/pp-offline/pp-offline/infer/lm"
	"github.com/pp-offline/pp-offline/infer/mimi"
)

// Session is a lockstep batch of conversations over one loaded LM (and,
// for conversations with audio, one codec): the only place that wires a
// frame. Each Step runs, for every member at once, one LM step (prefills
// of members that just joined in the same pass) on the frame's user codes,
// with the codec's encoder and decoder around it. The codec codes several
// frames of a member at a time when the members are few (CodecFrames): the
// user audio is encoded ahead, the frames the LM produced are decoded
// behind, a chunk of them at once (or when the member leaves), and each
// member's Output receives its frames in order; the codes and samples are
// those of coding frame by frame (mimi.Encoder.Encode), since the LM never
// reads the decoded audio. RunItems (the job), Bench and tune drive it;
// members join and leave between steps. A Session is used from one
// goroutine.
type Session struct {
	eng   *lm.Engine
	codec *mimi.Model // nil: the members give codes (an LM-only session)
	batch *mimi.Batch
	frame int // samples per frame
	nq    int // the codec's codebooks

	members []*Conversation
	// width is the most members the session has had: the codec's chunks
	// are sized for it (CodecFrames), so that a batch thinning out at the
	// end of a job keeps its streams' buffers (and memory) as they are.
	width int

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
	bufs    [][]float32
	encoded []*Conversation
}

// codecRows is the frames of codec work per pass that CodecFrames aims
// at: the real Mimi's weights are read once for that many frames, beyond
// which a frame costs the same (measured on a Zen 4: 6.4 ms a frame at 16
// frames a call, 13.8 at one).
const codecRows = 16

// CodecFrames is the frames of each member that a session of members
// members (at most) codes in one codec call: 16 for one conversation, 1
// from 16.
func CodecFrames(members int) int { return max(1, codecRows/max(1, members)) }

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

	ahead   []int // user codes encoded ahead (the codes of frames from f − next/nq)
	next    int   // where the next frame's codes start in ahead
	pending []int // codes of the frames generated and not decoded yet
	texts   []int // their text tokens
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
	c.f, c.ahead, c.next, c.pending, c.texts = 0, c.ahead[:0], 0, c.pending[:0], c.texts[:0]
	s.members = append(s.members, c)
	s.width = max(s.width, len(s.members))
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
// Frames are done (they have left the session, their last frames decoded
// and output), in join order. An error is the engine's (an offload
// failure, the context cancelled): the session is then unusable.
func (s *Session) Step() (left []*Conversation, t StepTimes, err error) {
	n := len(s.members)
	if n == 0 {
		return nil, t, nil
	}
	chunk := CodecFrames(s.width)
	s.gens, s.ins = s.gens[:0], s.ins[:0]
	s.encs, s.pcms, s.encoded = s.encs[:0], s.pcms[:0], s.encoded[:0]
	for len(s.bufs) < n {
		s.bufs = append(s.bufs, nil)
	}
	for i, c := range s.members {
		s.gens = append(s.gens, c.Gen)
		if c.Audio != nil && c.next >= len(c.ahead) {
			// Nothing encoded ahead: the next chunk of user audio.
			k := chunk
			if c.Frames > 0 {
				k = min(k, c.Frames-c.f)
			}
			buf := grow(s.bufs[i], k*s.frame)
			s.bufs[i] = buf
			clear(buf)
			for j := range k {
				c.Audio(c.f+j, buf[j*s.frame:(j+1)*s.frame])
			}
			s.encs, s.pcms, s.encoded = append(s.encs, c.enc), append(s.pcms, buf), append(s.encoded, c)
			s.codes = append(s.codes[:len(s.encs)-1], c.ahead)
		}
	}
	t0 := time.Now()
	if len(s.encs) > 0 {
		s.batch.Encode(s.encs, s.pcms, s.codes[:len(s.encs)])
		for k, c := range s.encoded {
			c.ahead, c.next, s.codes[k] = s.codes[k], 0, nil
		}
	}
	t1 := time.Now()
	for _, c := range s.members {
		if c.Audio != nil {
			s.ins = append(s.ins, lm.Input{User: c.ahead[c.next : c.next+s.nq]})
			c.next += s.nq
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
	s.decs, s.outs, s.owners = s.decs[:0], s.outs[:0], s.owners[:0]
	for _, c := range s.members {
		if out, ok := c.Gen.Output(); ok {
			t.Outputs++
			if c.dec == nil {
				if c.Output != nil {
					c.Output(out[0], nil)
				}
				continue
			}
			c.texts = append(c.texts, out[0])
			c.pending = append(c.pending, out[1:1+s.nq]...)
		}
		leaving := c.Frames > 0 && c.f+1 >= c.Frames
		if len(c.texts) > 0 && (len(c.texts) >= chunk || leaving) {
			s.decs, s.outs, s.owners = append(s.decs, c.dec), append(s.outs, c.pending), append(s.owners, c)
		}
	}
	for len(s.dpcm) < len(s.decs) {
		s.dpcm = append(s.dpcm, nil)
	}
	if len(s.decs) > 0 {
		s.batch.Decode(s.decs, s.outs, s.dpcm[:len(s.decs)])
	}
	t3 := time.Now()
	for i, c := range s.owners {
		for j, text := range c.texts {
			if c.Output != nil {
				c.Output(text, s.dpcm[i][j*s.frame:(j+1)*s.frame])
			}
		}
		c.pending, c.texts = c.pending[:0], c.texts[:0]
	}
	clear(s.outs)
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

// grow returns b resized to n (contents not kept when it grows).
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
