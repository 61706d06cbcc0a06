package mp3

import "math"

// Scale factor band widths (ISO/IEC 11172-3 table B.8, 13818-3 table B.2
// and the MPEG-2.5 extension), by rate index: 44.1, 48, 32, 22.05, 24, 16,
// 11.025, 12, 8 kHz. Long blocks: 22 bands of the 576 lines; short blocks:
// 13 bands of each window's 192.
var (
	longWidths = [9][22]int{
		{4, 4, 4, 4, 4, 4, 6, 6, 8, 8, 10, 12, 16, 20, 24, 28, 34, 42, 50, 54, 76, 158},
		{4, 4, 4, 4, 4, 4, 6, 6, 6, 8, 10, 12, 16, 18, 22, 28, 34, 40, 46, 54, 54, 192},
		{4, 4, 4, 4, 4, 4, 6, 6, 8, 10, 12, 16, 20, 24, 30, 38, 46, 56, 68, 84, 102, 26},
		{6, 6, 6, 6, 6, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 38, 46, 52, 60, 68, 58, 54},
		{6, 6, 6, 6, 6, 6, 8, 10, 12, 14, 16, 18, 22, 26, 32, 38, 46, 54, 62, 70, 76, 36},
		{6, 6, 6, 6, 6, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 38, 46, 52, 60, 68, 58, 54},
		{6, 6, 6, 6, 6, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 38, 46, 52, 60, 68, 58, 54},
		{6, 6, 6, 6, 6, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 38, 46, 52, 60, 68, 58, 54},
		{12, 12, 12, 12, 12, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 76, 90, 2, 2, 2, 2, 2},
	}
	shortWidths = [9][13]int{
		{4, 4, 4, 4, 6, 8, 10, 12, 14, 18, 22, 30, 56},
		{4, 4, 4, 4, 6, 6, 10, 12, 14, 16, 20, 26, 66},
		{4, 4, 4, 4, 6, 8, 12, 16, 20, 26, 34, 42, 12},
		{4, 4, 4, 6, 6, 8, 10, 14, 18, 26, 32, 42, 18},
		{4, 4, 4, 6, 8, 10, 12, 14, 18, 24, 32, 44, 12},
		{4, 4, 4, 6, 8, 10, 12, 14, 18, 24, 30, 40, 18},
		{4, 4, 4, 6, 8, 10, 12, 14, 18, 24, 30, 40, 18},
		{4, 4, 4, 6, 8, 10, 12, 14, 18, 24, 30, 40, 18},
		{8, 8, 8, 12, 16, 20, 24, 28, 36, 2, 2, 2, 26},
	}
)

// Band starts computed from the widths: longStart[r][b] for b = 0 … 22 (the
// last is 576), shortStart[r][b] for b = 0 … 13 (192).
var (
	longStart  [9][23]int
	shortStart [9][14]int
)

// pretab is the preemphasis added to long-block scale factors when preflag
// is set (table B.6).
var pretab = [22]int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 3, 2, 0}

// slen1, slen2: MPEG-1 scale factor bit counts by scalefac_compress.
var (
	slen1 = [16]int{0, 0, 0, 0, 3, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4}
	slen2 = [16]int{0, 1, 2, 3, 0, 1, 2, 3, 1, 2, 3, 1, 2, 3, 2, 3}
)

// lsfBands is nr_of_sfb_block of ISO/IEC 13818-3 (table B.3 … ): scale
// factors in each of the four partitions, by scalefac_compress range (six
// rows, the last three for the intensity-stereo right channel) and block
// kind (long, short, mixed). Short counts are bands × 3 windows.
var lsfBands = [6][3][4]int{
	{{6, 5, 5, 5}, {9, 9, 9, 9}, {6, 9, 9, 9}},
	{{6, 5, 7, 3}, {9, 9, 12, 6}, {6, 9, 12, 6}},
	{{11, 10, 0, 0}, {18, 18, 0, 0}, {15, 18, 0, 0}},
	{{7, 7, 7, 0}, {12, 12, 12, 0}, {6, 15, 12, 0}},
	{{6, 6, 6, 3}, {12, 9, 9, 6}, {6, 12, 9, 6}},
	{{8, 8, 5, 0}, {15, 12, 9, 0}, {6, 18, 9, 0}},
}

// Derived tables, computed at init.
var (
	// pow43[i] = i^(4/3) for every magnitude Huffman decoding can give
	// (15 + a 13-bit linbits value).
	pow43 [15 + 1<<13]float64
	// pow2q[i] = 2^(-(i-64)/4), the requantization exponent's factor.
	pow2q [pow2qSize]float64
	// Alias reduction butterflies.
	aliasCS, aliasCA [8]float64
	// imdctWin[t] is block type t's window over 36 samples (t = 2: the
	// 12-sample short window in the first 12).
	imdctWin [4][36]float64
	// imdctHalf[m][k] = cos(π/72 (2m + 1)(2k + 1)), m, k < 18: the
	// long IMDCT's distinct rows.
	imdctHalf [18][18]float64
	// imdctShort[i][k] = cos(π/24 (2i + 1 + 6)(2k + 1)), i < 12, k < 6.
	imdctShort [12][6]float64
	// synthD is the whole 512-tap synthesis window D[i].
	synthD [512]float64
	// isRatio[p] is MPEG-1 intensity position p's (left, right) factors.
	isRatio [7][2]float64
	// isLSF[s][p]: MPEG-2 intensity position p's factors, s the
	// intensity_scale bit.
	isLSF [2][32][2]float64
)

// pow2qSize bounds the exponents: 210 − global_gain (from −45) offset by
// 64, plus at most 8·7 (subblock gain) + 4·31 (a 5-bit scale factor of an
// MPEG-2 intensity-stereo channel) or 4·(31 + 3) with preemphasis: at most
// 454.
const pow2qSize = 512

func init() {
	for r := range 9 {
		for b := range 22 {
			longStart[r][b+1] = longStart[r][b] + longWidths[r][b]
		}
		for b := range 13 {
			shortStart[r][b+1] = shortStart[r][b] + shortWidths[r][b]
		}
	}
	for i := range pow43 {
		pow43[i] = math.Pow(float64(i), 4.0/3)
	}
	for i := range pow2q {
		pow2q[i] = math.Pow(2, -float64(i-64)/4)
	}
	ci := [8]float64{-0.6, -0.535, -0.33, -0.185, -0.095, -0.041, -0.0142, -0.0037}
	for i, c := range ci {
		aliasCS[i] = 1 / math.Sqrt(1+c*c)
		aliasCA[i] = c / math.Sqrt(1+c*c)
	}
	for i := range 36 {
		imdctWin[0][i] = math.Sin(math.Pi / 36 * (float64(i) + 0.5))
	}
	for i := range 18 {
		imdctWin[1][i] = imdctWin[0][i]
		imdctWin[3][i+18] = imdctWin[0][i+18]
	}
	for i := 18; i < 24; i++ {
		imdctWin[1][i] = 1
	}
	for i := 24; i < 30; i++ {
		imdctWin[1][i] = math.Sin(math.Pi / 12 * (float64(i-18) + 0.5))
	}
	for i := 6; i < 12; i++ {
		imdctWin[3][i] = math.Sin(math.Pi / 12 * (float64(i-6) + 0.5))
	}
	for i := 12; i < 18; i++ {
		imdctWin[3][i] = 1
	}
	for i := range 12 {
		imdctWin[2][i] = math.Sin(math.Pi / 12 * (float64(i) + 0.5))
	}
	for m := range 18 {
		for k := range 18 {
			imdctHalf[m][k] = math.Cos(math.Pi / 72 * float64((2*m+1)*(2*k+1)))
		}
	}
	for i := range 12 {
		for k := range 6 {
			imdctShort[i][k] = math.Cos(math.Pi / 24 * float64((2*i+1+6)*(2*k+1)))
		}
	}
	// D[512 - i] = -D[i], except at i = 64, 128 and 192, where the sign
	// stays (table 3-B.3).
	for i := 0; i <= 256; i++ {
		v := float64(synthWindow[i]) / 65536
		synthD[i] = v
		if i > 0 && i < 256 {
			if i%64 == 0 {
				synthD[512-i] = v
			} else {
				synthD[512-i] = -v
			}
		}
	}
	for p := range 7 {
		if p == 6 {
			isRatio[p] = [2]float64{1, 0}
			continue
		}
		t := math.Tan(float64(p) * math.Pi / 12)
		isRatio[p] = [2]float64{t / (1 + t), 1 / (1 + t)}
	}
	for s := range 2 {
		io := math.Pow(2, -0.25*float64(s+1))
		for p := range 32 {
			switch {
			case p == 0:
				isLSF[s][p] = [2]float64{1, 1}
			case p%2 == 1:
				isLSF[s][p] = [2]float64{math.Pow(io, float64(p+1)/2), 1}
			default:
				isLSF[s][p] = [2]float64{1, math.Pow(io, float64(p)/2)}
			}
		}
	}
}
