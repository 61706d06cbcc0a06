package prompts

import "sort"

// pieceTrie is a byte trie over the vocabulary, built once at load. Node 0 is
// the root; its children are found through a 256-entry table, deeper nodes
// keep their children sorted in a shared edge array.
type pieceTrie struct {
	root   [256]int32 // child of the root for each byte; 0 = none
	first  []int32    // per node: index of its first edge
	count  []uint16   // per node: number of edges
	value  []int32    // per node: id of the key ending here, -1 if none
	labels []byte     // edge labels
	kids   []int32    // edge targets
}

// newPieceTrie builds a trie mapping each key to its value. Keys must be
// distinct (callers reject duplicates beforehand).
func newPieceTrie(keys []string, values []int32) *pieceTrie {
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return keys[order[a]] < keys[order[b]] })
	sorted := make([]string, len(keys))
	for i, k := range order {
		sorted[i] = keys[k]
	}
	t := &pieceTrie{}
	// Breadth first over ranges of the sorted keys sharing a prefix: a node
	// is sorted[lo:hi] at depth d; its edges are laid out together.
	type span struct{ lo, hi, depth int }
	queue := []span{{0, len(sorted), 0}}
	for qi := 0; qi < len(queue); qi++ {
		sp := queue[qi]
		node := qi
		t.first = append(t.first, int32(len(t.labels)))
		t.value = append(t.value, -1)
		lo := sp.lo
		if lo < sp.hi && len(sorted[lo]) == sp.depth {
			t.value[node] = values[order[lo]]
			lo++
		}
		n := 0
		for lo < sp.hi {
			c := sorted[lo][sp.depth]
			hi := lo + 1
			for hi < sp.hi && sorted[hi][sp.depth] == c {
				hi++
			}
			child := int32(len(queue))
			queue = append(queue, span{lo, hi, sp.depth + 1})
			t.labels = append(t.labels, c)
			t.kids = append(t.kids, child)
			if node == 0 {
				t.root[c] = child
			}
			n++
			lo = hi
		}
		t.count = append(t.count, uint16(n))
	}
	return t
}

// child returns the child of node for byte c, 0 if none.
func (t *pieceTrie) child(node int32, c byte) int32 {
	if node == 0 {
		return t.root[c]
	}
	lo := int(t.first[node])
	hi := lo + int(t.count[node])
	if hi-lo <= 8 {
		for i := lo; i < hi; i++ {
			if l := t.labels[i]; l >= c {
				if l == c {
					return t.kids[i]
				}
				return 0
			}
		}
		return 0
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.labels[m] < c {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < int(t.first[node])+int(t.count[node]) && t.labels[lo] == c {
		return t.kids[lo]
	}
	return 0
}

// longestPrefix returns the byte length of the longest key that is a prefix
// of s among the first 64 such keys (sentencepiece's PrefixMatcher), 0 if
// none.
func (t *pieceTrie) longestPrefix(s string) int {
	node := int32(0)
	best, found := 0, 0
	for i := 0; i < len(s); i++ {
		node = t.child(node, s[i])
		if node == 0 {
			break
		}
		if t.value[node] >= 0 {
			if found < 64 {
				best = i + 1
			}
			found++
		}
	}
	return best
}
