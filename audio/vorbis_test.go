package audio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// oggPages splits an Ogg file into its pages (each a copy).
func oggPages(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var pages [][]byte
	for off := 0; off < len(data); {
		hlen, blen, ok := oggHeader(data[off:])
		if !ok || off+hlen+blen > len(data) {
			t.Fatalf("no Ogg page at offset %d", off)
		}
		pages = append(pages, bytes.Clone(data[off:off+hlen+blen]))
		off += hlen + blen
	}
	return pages
}

// oggSetCRC writes a page's CRC-32 (oggCRCOK's) into it.
func oggSetCRC(pg []byte) []byte {
	binary.LittleEndian.PutUint32(pg[22:], 0)
	var crc uint32
	for _, b := range pg {
		crc = crc<<8 ^ oggCRCTable[byte(crc>>24)^b]
	}
	binary.LittleEndian.PutUint32(pg[22:], crc)
	return pg
}

// oggReserial gives every page of an Ogg file another serial number.
func oggReserial(t *testing.T, data []byte, serial uint32) []byte {
	var out []byte
	for _, pg := range oggPages(t, data) {
		binary.LittleEndian.PutUint32(pg[14:], serial)
		out = append(out, oggSetCRC(pg)...)
	}
	return out
}

// oggNoEOS clears the end-of-stream flag of an Ogg file's last page (an
// encoder cut off before it wrote it).
func oggNoEOS(t *testing.T, data []byte) []byte {
	pages := oggPages(t, data)
	last := pages[len(pages)-1]
	last[5] &^= 4
	oggSetCRC(last)
	return bytes.Join(pages, nil)
}

// oggTestPage is an Ogg page of the given stream holding whole packets,
// with the given header flags (2: it begins the stream, 4: it ends it).
func oggTestPage(serial, seq uint32, flags byte, gran int64, packets ...[]byte) []byte {
	pg := make([]byte, 27)
	copy(pg, "OggS")
	pg[5] = flags
	binary.LittleEndian.PutUint64(pg[6:], uint64(gran))
	binary.LittleEndian.PutUint32(pg[14:], serial)
	binary.LittleEndian.PutUint32(pg[18:], seq)
	var body []byte
	for _, p := range packets {
		n := len(p)
		for ; n >= 255; n -= 255 {
			pg = append(pg, 255)
		}
		pg = append(pg, byte(n))
		body = append(body, p...)
	}
	pg[26] = byte(len(pg) - 27)
	return oggSetCRC(append(pg, body...))
}

// oggForeignPage is a page of another logical stream (serial 0xF00D)
// holding one packet.
func oggForeignPage(flags byte, seq uint32, packet string) []byte {
	return oggTestPage(0xF00D, seq, flags, 0, []byte(packet))
}

// A chained Ogg file (RFC 3533: one stream after another, as `cat a.ogg
// b.ogg` makes) is refused in one line naming where the second link
// starts, never decoded as its first link alone: with the same serial or
// another, with or without the first link's end-of-stream flag, links of
// the same or of different rates and channels, and a second link that
// begins after trailing pages of another stream.
func TestChainedOggRefused(t *testing.T) {
	mono := mustRead(t, fixtures+"vorbis_24k_mono.ogg")
	stereo := mustRead(t, fixtures+"vorbis_48k_stereo.ogg")
	serial := binary.LittleEndian.Uint32(mono[14:])
	other := oggReserial(t, mono, serial+1)
	monoTail := oggForeignPage(4, 1, "tail") // a last page of another stream
	for _, tc := range []struct {
		name  string
		first []byte // the first link
		gap   []byte // pages between the links
		next  []byte // the second link
	}{
		{"same file twice", mono, nil, mono},
		{"another serial", mono, nil, other},
		{"same serial, no end-of-stream flag", oggNoEOS(t, mono), nil, mono},
		{"another serial, no end-of-stream flag", oggNoEOS(t, mono), nil, other},
		{"another rate and channels", mono, nil, stereo},
		{"after another stream's last page", mono, monoTail, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := splice(tc.first, tc.gap, tc.next)
			want := fmt.Sprintf("x.ogg: chained Ogg stream (a second logical stream starts at byte %d): not supported; convert the file: ffmpeg -i x.ogg -c:a pcm_f32le out.wav", len(tc.first)+len(tc.gap))
			c, err := Decode(data, "x.ogg")
			if err == nil {
				t.Fatalf("decoded %d frames without an error", c.Frames())
			}
			if err.Error() != want {
				t.Fatalf("error %q\nwant  %q", err, want)
			}
		})
	}
}

// Pages of another logical stream multiplexed with the Vorbis one (a
// skeleton or video stream: its first page among the first pages, its
// pages between the Vorbis pages, its last page after the Vorbis stream's
// end) are skipped, and so are bytes after the end of the stream that are
// no Ogg page, and a page that begins another stream among the Vorbis
// pages (not allowed by RFC 3533, but no chain: the Vorbis stream goes on
// after it): the samples are those of the Vorbis stream alone, bit for bit.
func TestOggOtherStreamsSkipped(t *testing.T) {
	// The fixtures as they are (their audio on one page or two), and
	// rebuilt with a page for each audio packet.
	files := map[string][]byte{}
	for _, f := range []string{"vorbis_24k_mono.ogg", "vorbis_48k_stereo.ogg"} {
		data := mustRead(t, fixtures+f)
		files[f] = data
		pk, last := oggPackets(t, data)
		var paged []byte
		for i, p := range pk {
			flags, gran := byte(0), int64(-1)
			switch {
			case i == 0:
				flags, gran = 2, 0
			case i < 3:
				gran = 0
			case i == len(pk)-1:
				flags, gran = 4, last
			}
			paged = append(paged, oggTestPage(0x1234, uint32(i), flags, gran, p)...)
		}
		files[f+" paged"] = paged
	}
	for f, data := range files {
		want, err := Decode(data, "x.ogg")
		if err != nil {
			t.Fatal(err)
		}
		pages := oggPages(t, data)
		first, rest := pages[0], pages[1:]
		mid := len(rest) / 2
		if mid < 1 {
			t.Fatalf("%s: only %d pages", f, len(pages))
		}
		for name, file := range map[string][]byte{
			"multiplexed": splice(first, oggForeignPage(2, 0, "\x80theora"), bytes.Join(rest[:1], nil),
				oggForeignPage(0, 1, "video"), bytes.Join(rest[1:mid], nil), oggForeignPage(0, 2, "video"),
				bytes.Join(rest[mid:], nil), oggForeignPage(4, 3, "video")),
			"stream begins mid-file": splice(first, bytes.Join(rest[:mid], nil), oggForeignPage(2, 0, "\x80theora"),
				bytes.Join(rest[mid:], nil)),
			"junk after the end": splice(data, []byte("not an Ogg page, some trailing junk")),
			"bad page after the end": splice(data, func() []byte {
				pg := oggForeignPage(2, 0, "\x01vorbis")
				pg[len(pg)-1] ^= 1 // its checksum fails: junk, not a next link
				return pg
			}()),
		} {
			c, err := Decode(file, "x.ogg")
			if err != nil {
				t.Fatalf("%s, %s: %v", f, name, err)
			}
			if c.SampleRate != want.SampleRate || len(c.Channels) != len(want.Channels) {
				t.Fatalf("%s, %s: %d Hz × %d channels, want %d × %d", f, name, c.SampleRate, len(c.Channels), want.SampleRate, len(want.Channels))
			}
			for ch := range want.Channels {
				if !sameBits(c.Channels[ch], want.Channels[ch]) {
					t.Fatalf("%s, %s: channel %d differs", f, name, ch)
				}
			}
		}
	}
}

// The chain error is also what a chain whose links share a serial number
// gets when its first link decodes to more samples than the granule
// position the file ends with (the second link's) declares: the
// declared-length check meets it first.
func TestChainedOggLongFirstLink(t *testing.T) {
	pk, last := oggPackets(t, mustRead(t, fixtures+"vorbis_24k_mono.ogg"))
	many := append([][]byte(nil), pk[:3]...)
	for i := 0; i < 10; i++ {
		many = append(many, pk[3:]...)
	}
	// The long link's last granule position is past its samples: all are
	// kept (the end is trimmed to min(decoded, granule)).
	long, short := oggFile(many, 1<<20), oggFile(pk, last) // serial 0x1234 both
	if _, err := Decode(long, "x.ogg"); err != nil {
		t.Fatal(err)
	}
	_, err := Decode(splice(long, short), "x.ogg")
	if err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("x.ogg: chained Ogg stream (a second logical stream starts at byte %d)", len(long))) {
		t.Fatalf("error %v", err)
	}
}
