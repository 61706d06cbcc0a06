//go:build !purego

package ops

// The FMA units' peak, for the benchmarks that say how far a kernel is
// from it (BenchmarkFMAPeak): independent chains of VFMADD231PS, n
// rounds, on zmm (fmaPeak512, AVX-512F: 24 chains) or ymm (fmaPeak256,
// FMA3: 12 chains, as many as a VEX encoding's 16 registers leave) registers;
// one FMA of 16 or 8 lanes a chain a round, each chain adding 1·1, so
// chain 0 ends at n (returned: the chains ran).
//
//go:noescape
func fmaPeak512(n int) float32

//go:noescape
func fmaPeak256(n int) float32
