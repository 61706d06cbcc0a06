package prompts

// kUnkPenalty of unigram_model.cc: an unknown character scores
// min_score - 10.
const unkPenalty = 10.0

// segment is one piece of the model's segmentation: normalized[start:end]
// with its id.
type segment struct {
	start, end int32
	id         int32
}

// bestNode is the best path ending at a byte position (unigram Viterbi).
type bestNode struct {
	score float32
	start int32 // -1: not reached yet
	id    int32
}

// encodeScratch holds the buffers of one Encode call, pooled.
type encodeScratch struct {
	norm []byte
	best []bestNode
	segs []segment
	out  []int32

	// BPE
	syms  []bpeSymbol
	queue bpeQueue
}

func (t *Tokenizer) getScratch() *encodeScratch {
	if s, ok := t.scratch.Get().(*encodeScratch); ok {
		return s
	}
	return &encodeScratch{}
}

// encode normalizes text, segments it with the model and post-processes the
// segments (SentencePieceProcessor::PopulateSentencePieceText): byte fallback
// for unknown pieces, or one id for each run of unknown pieces. The ids are
// left in s.out.
func (t *Tokenizer) encode(text string, s *encodeScratch) {
	s.norm = t.norm.normalize(text, s.norm)
	s.segs = s.segs[:0]
	s.out = s.out[:0]
	if len(s.norm) == 0 {
		return
	}
	// One conversion; every piece below is a substring of it.
	norm := string(s.norm)
	switch t.modelType {
	case modelBPE:
		t.encodeBPE(norm, s)
	case modelWord:
		t.encodeWord(norm, s)
	case modelChar:
		t.encodeChar(norm, s)
	default:
		t.encodeUnigram(norm, s)
	}
	prevUnk := false
	for _, sg := range s.segs {
		isUnk := sg.id == t.unkID
		switch {
		case isUnk && t.byteFallback:
			for i := sg.start; i < sg.end; i++ {
				s.out = append(s.out, t.byteIDs[norm[i]])
			}
		case isUnk && prevUnk:
			// merged into the previous <unk>
		default:
			s.out = append(s.out, sg.id)
		}
		prevUnk = isUnk
	}
}

// oneCharLen is sentencepiece's OneCharLen: the UTF-8 length announced by a
// lead byte (1 for continuation bytes).
func oneCharLen(c byte) int {
	return int("\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x02\x02\x03\x04"[c>>4])
}

// encodeUnigram is unigram::Model::EncodeOptimized: Viterbi over byte
// positions, keeping only the best path ending at each position. The float
// arithmetic follows the C++ exactly (see the comments) so that ties break
// the same way.
func (t *Tokenizer) encodeUnigram(norm string, s *encodeScratch) {
	size := len(norm)
	if cap(s.best) < size+1 {
		s.best = make([]bestNode, size+1)
	}
	best := s.best[:size+1]
	for i := range best {
		best[i] = bestNode{start: -1}
	}
	unkScore := t.minScore - unkPenalty // float - float: float
	trie := t.trie
	pieces := t.pieces
	for startsAt := 0; startsAt < size; {
		base := best[startsAt].score
		hasSingle := false
		mblen := min(oneCharLen(norm[startsAt]), size-startsAt)
		node := int32(0)
		for keyPos := startsAt; keyPos < size; {
			node = trie.child(node, norm[keyPos])
			keyPos++
			if node == 0 {
				break
			}
			id := trie.value[node]
			if id < 0 {
				continue
			}
			typ := pieces[id].typ
			if typ == typeUnused {
				continue
			}
			length := keyPos - startsAt
			// score is a double in the C++: the ternary mixes
			// (size_t*float - 0.1) and float.
			var score float64
			if typ == typeUserDefined {
				score = float64(float32(float32(length)*t.maxScore)) - 0.1
			} else {
				score = float64(pieces[id].score)
			}
			cand := score + float64(base)
			tgt := &best[keyPos]
			if tgt.start == -1 || cand > float64(tgt.score) {
				tgt.score = float32(cand)
				tgt.start = int32(startsAt)
				tgt.id = id
			}
			if length == mblen {
				hasSingle = true
			}
		}
		if !hasSingle {
			tgt := &best[startsAt+mblen]
			cand := float32(unkScore + base) // float + float: float
			if tgt.start == -1 || cand > tgt.score {
				tgt.score = cand
				tgt.start = int32(startsAt)
				tgt.id = t.unkID
			}
		}
		startsAt += mblen
	}
	// Backtrack.
	n := 0
	for end := size; end > 0; {
		st := best[end].start
		if st < 0 || int(st) >= end {
			break // cannot happen: every character boundary is reachable
		}
		n++
		end = int(st)
	}
	if cap(s.segs) < n {
		s.segs = make([]segment, n)
	}
	segs := s.segs[:n]
	for end, i := size, n-1; end > 0 && i >= 0; i-- {
		b := best[end]
		segs[i] = segment{start: b.start, end: int32(end), id: b.id}
		end = int(b.start)
	}
	s.segs = segs
}

// prefixMatch is PrefixMatcher::PrefixMatch: the longest user-defined symbol
// at the start of s (frozen), else one character.
func (t *Tokenizer) prefixMatch(s string) (n int, found bool) {
	if t.matcher != nil {
		if l := t.matcher.longestPrefix(s); l > 0 {
			return l, true
		}
	}
	return min(len(s), oneCharLen(s[0])), false
}

// encodeChar is character::Model::Encode.
func (t *Tokenizer) encodeChar(norm string, s *encodeScratch) {
	for i := 0; i < len(norm); {
		n, _ := t.prefixMatch(norm[i:])
		s.segs = append(s.segs, segment{int32(i), int32(i + n), t.pieceToID(norm[i : i+n])})
		i += n
	}
}

// encodeWord is word::Model::Encode: SplitIntoWords (a new word at the start
// and at every "▁"), then a vocabulary lookup per word.
func (t *Tokenizer) encodeWord(norm string, s *encodeScratch) {
	start := 0
	for i := 0; i < len(norm); {
		n := min(oneCharLen(norm[i]), len(norm)-i)
		if i > 0 && norm[i:i+n] == spaceSymbol {
			s.segs = append(s.segs, segment{int32(start), int32(i), t.pieceToID(norm[start:i])})
			start = i
		}
		i += n
	}
	s.segs = append(s.segs, segment{int32(start), int32(len(norm)), t.pieceToID(norm[start:])})
}

// bpeSymbol is one symbol of the BPE merge loop: norm[start:end].
type bpeSymbol struct {
	prev, next int32
	start, end int32
	freeze     bool
}

// bpePair is a candidate merge of symbols left and right.
type bpePair struct {
	left, right int32
	score       float32
	size        int32
}

// bpeQueue is a binary max-heap of candidate merges: higher score first,
// then the leftmost pair (std::priority_queue with SymbolPairComparator).
type bpeQueue []bpePair

func (p *bpePair) before(o *bpePair) bool {
	return p.score > o.score || (p.score == o.score && p.left < o.left)
}

func (q *bpeQueue) push(x bpePair) {
	h := append(*q, x)
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h[i].before(&h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	*q = h
}

func (q *bpeQueue) pop() bpePair {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h[l].before(&h[m]) {
			m = l
		}
		if r < n && h[r].before(&h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// encodeBPE is bpe::Model::SampleEncode without dropout: split into
// characters (user-defined symbols whole and frozen), then repeatedly merge
// the adjacent pair whose concatenation is the best-scoring piece (ties: the
// leftmost), and finally split merged UNUSED pieces back.
func (t *Tokenizer) encodeBPE(norm string, s *encodeScratch) {
	syms := s.syms[:0]
	for i := 0; i < len(norm); {
		n, frozen := t.prefixMatch(norm[i:])
		idx := int32(len(syms))
		next := idx + 1
		if i+n >= len(norm) {
			next = -1
		}
		syms = append(syms, bpeSymbol{prev: idx - 1, next: next, start: int32(i), end: int32(i + n), freeze: frozen})
		i += n
	}
	s.syms = syms
	q := s.queue[:0]
	var revMerge map[string][2]string
	addPair := func(left, right int32) {
		if left < 0 || right < 0 || syms[left].freeze || syms[right].freeze {
			return
		}
		piece := norm[syms[left].start:syms[right].end]
		id, ok := t.pieceIDs[piece]
		if !ok {
			return
		}
		q.push(bpePair{left: left, right: right, score: t.pieces[id].score, size: int32(len(piece))})
		if t.pieces[id].typ == typeUnused {
			if revMerge == nil {
				revMerge = make(map[string][2]string)
			}
			revMerge[piece] = [2]string{norm[syms[left].start:syms[left].end], norm[syms[right].start:syms[right].end]}
		}
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		addPair(i-1, i)
	}
	for len(q) > 0 {
		top := q.pop()
		l, r := &syms[top.left], &syms[top.right]
		if l.start == l.end || r.start == r.end || (l.end-l.start)+(r.end-r.start) != top.size {
			continue // stale
		}
		l.end = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = top.left
		}
		r.start, r.end = 0, 0
		addPair(l.prev, top.left)
		addPair(top.left, l.next)
	}
	s.queue = q
	var resegment func(w string, start int32)
	resegment = func(w string, start int32) {
		id := t.pieceToID(w)
		if t.pieces[id].typ == typeUnused {
			if p, ok := revMerge[w]; ok {
				resegment(p[0], start)
				resegment(p[1], start+int32(len(p[0])))
				return
			}
		}
		s.segs = append(s.segs, segment{start, start + int32(len(w)), id})
	}
	if len(syms) == 0 {
		return
	}
	for i := int32(0); i != -1; i = syms[i].next {
		sy := syms[i]
		resegment(norm[sy.start:sy.end], sy.start)
	}
}
