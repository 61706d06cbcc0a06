#!/bin/sh
# Regenerates the decoder fixtures under testdata/audio/ from
# testdata/tiny/input.wav with Debian's ffmpeg (apt-get install ffmpeg):
# tiny FLAC / MP3 / Ogg Vorbis / Ogg Opus / µ-law / A-law files, and next to
# each X its reference decoding X.ref.wav (ffmpeg's decoding, 32-bit float,
# same rate and channels), which audio's tests compare pp-offline's decoders
# against. The tests never run ffmpeg except TestFixtureReferencesAreFFmpegs,
# which re-decodes with ffmpeg (when it is installed) and checks the .ref.wav
# files are what this script's decode step gives.
#
#   scripts/make_audio_fixtures.sh            encode + decode (new fixtures)
#   scripts/make_audio_fixtures.sh decode DIR decode only, into DIR
set -eu
cd "$(dirname "$0")/.."
src=testdata/tiny/input.wav
dir=testdata/audio
ff="ffmpeg -hide_banner -loglevel error -nostdin -y"

decode() { # decode IN OUT: ffmpeg's reference decoding, bit-exact, no metadata
	$ff -i "$1" -map_metadata -1 -fflags +bitexact -flags:a +bitexact -c:a pcm_f32le -f wav "$2"
}

if [ "${1:-}" = decode ]; then
	out=$2
	for f in "$dir"/*; do
		case $f in *.ref.wav | *opus*) continue ;; esac
		decode "$f" "$out/$(basename "$f").ref.wav"
	done
	exit 0
fi

# A 0.06 s excerpt (0.04 s for the 44.1/48 kHz stereo files) of the fixture's speech, 1.0 s in (not silence).
cut="-ss 1.0 -t 0.06 -i $src"
cut2="-ss 1.0 -t 0.04 -i $src"
# Stereo variants: the right channel is the left one, halved and delayed 1 ms,
# so that a decoder that swaps or drops channels is caught.
stereo="pan=stereo|c0=c0|c1=0.5*c0,adelay=0|1"
enc="-map_metadata -1 -fflags +bitexact -flags:a +bitexact"

$ff $cut $enc -c:a flac -compression_level 8 "$dir/flac_24k_s16_mono.flac"
$ff $cut2 $enc -af "$stereo,aresample=44100" -c:a flac -sample_fmt s32 -bits_per_raw_sample 24 "$dir/flac_44k_s24_stereo.flac"
$ff $cut $enc -c:a libmp3lame -b:a 48k "$dir/mp3_24k_mono.mp3"
$ff $cut2 $enc -af "$stereo,aresample=44100" -c:a libmp3lame -b:a 128k "$dir/mp3_44k_stereo.mp3"
$ff $cut $enc -c:a libvorbis -q:a 4 "$dir/vorbis_24k_mono.ogg"
$ff $cut2 $enc -af "$stereo,aresample=48000" -c:a libvorbis -q:a 4 "$dir/vorbis_48k_stereo.ogg"
$ff $cut $enc -af aresample=8000 -c:a pcm_mulaw "$dir/ulaw_8k.wav"
$ff $cut $enc -af "$stereo,aresample=8000" -c:a pcm_alaw "$dir/alaw_8k_stereo.wav"
# Every G.711 code once, µ-law and A-law: the expansion tables in full.
LC_ALL=C awk 'BEGIN { for (i = 0; i < 256; i++) printf "%c", i }' >"$dir/codes.raw"
$ff -f mulaw -ar 8000 -ac 1 -i "$dir/codes.raw" $enc -c:a copy "$dir/ulaw_all_codes.wav"
$ff -f alaw -ar 8000 -ac 1 -i "$dir/codes.raw" $enc -c:a copy "$dir/alaw_all_codes.wav"
rm "$dir/codes.raw"
# Ogg Opus: not decoded (no well-kept pure-Go decoder); the tests check the
# error says so.
$ff $cut $enc -c:a libopus -b:a 24k "$dir/opus_24k.opus"

for f in "$dir"/*; do
	case $f in *.ref.wav | *opus*) continue ;; esac
	decode "$f" "$f.ref.wav"
done
ls -l "$dir"
