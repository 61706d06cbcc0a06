// Package suggest finds the name a user probably meant ("did you mean"),
// for flags, commands, config and manifest keys.
package suggest

import (
	"sort"
	"strings"
)

// Closest returns the candidate nearest to s: a unique one that s is a
// prefix of, else the one at the smallest edit distance when that is at most
// a third of the name's length (at least 1, at most 3); "" when none is close.
func Closest(s string, candidates []string) string {
	sort.Strings(candidates)
	var prefixed []string
	for _, c := range candidates {
		if c == s {
			return ""
		}
		if len(s) >= 3 && strings.HasPrefix(c, s) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(s, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := min(max(len(s)/3, 1), 3)
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment: insertions, deletions, substitutions, adjacent swaps).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
