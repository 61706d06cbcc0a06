#!/usr/bin/python3
"""Independent reference values for the metrics of package compare.

Recomputes, with numpy and scipy (Debian python3-numpy 1.24 / python3-scipy
1.10: `apt-get install -y python3-numpy python3-scipy`, run with
/usr/bin/python3 from the repository root), the metrics that
compare/compare_test.go checks against hard-coded numbers:

    /usr/bin/python3 scripts/compare_reference_metrics.py          # cases
    /usr/bin/python3 scripts/compare_reference_metrics.py --noise  # mel threshold table

The implementation is deliberately written differently from the Go code:
the STFT is scipy.signal.stft (periodic Hann from scipy.signal.get_window,
boundary=None, padded=True, i.e. no centring and the last frame zero-padded;
scaling="spectrum" divides by sum(window) = 512, undone below), the mel
triangles come from np.interp over the three corner frequencies, and the
SI-SDR uses the projection formula.

Signals: testdata/tiny/input.wav and testdata/tiny/expected/run_pt/output.wav
(16-bit PCM mono 24 kHz, 44-byte header), decoded as int16 / 32768 to
float32, like the audio package.
"""

import json
import sys

import numpy as np
import scipy.signal

SR = 24000
NFFT, HOP, NMELS, TOP_DB, ABS_FLOOR = 1024, 256, 80, 60.0, 1e-10


def read_wav16(path):
    return (np.fromfile(path, dtype="<i2", offset=44).astype(np.float32) / np.float32(32768)).astype(np.float32)


def mel_power(x, sr=SR):
    x = x.astype(np.float64)
    if len(x) < NFFT:
        x = np.concatenate([x, np.zeros(NFFT - len(x))])
    _, _, z = scipy.signal.stft(x, fs=sr, window="hann", nperseg=NFFT, noverlap=NFFT - HOP, nfft=NFFT,
                                detrend=False, return_onesided=True, boundary=None, padded=True,
                                scaling="spectrum")
    win_sum = scipy.signal.get_window("hann", NFFT).sum()
    power = np.abs(z * win_sum) ** 2  # [bins, frames]
    mel = lambda f: 2595.0 * np.log10(1.0 + f / 700.0)
    imel = lambda m: 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    corners = imel(np.linspace(0.0, mel(sr / 2.0), NMELS + 2))
    freqs = np.arange(NFFT // 2 + 1) * sr / NFFT
    fb = np.stack([np.interp(freqs, corners[b:b + 3], [0.0, 1.0, 0.0], left=0.0, right=0.0)
                   for b in range(NMELS)])
    return (fb @ power).T  # [frames, bands]


def mel_floor(mr):
    return max(mr.max() * 10.0 ** (-TOP_DB / 10.0), ABS_FLOOR)


def mel_distance(r, c):
    mr, mc = mel_power(r), mel_power(c)
    fl = mel_floor(mr)
    return float(np.mean(np.abs(10 * np.log10(np.maximum(mc, fl)) - 10 * np.log10(np.maximum(mr, fl)))))


def snr(r, c):
    r, c = r.astype(np.float64), c.astype(np.float64)
    return float(10 * np.log10(np.sum(r ** 2) / np.sum((c - r) ** 2)))


def si_sdr(r, c):
    r, c = r.astype(np.float64), c.astype(np.float64)
    target = (np.dot(c, r) / np.dot(r, r)) * r
    return float(10 * np.log10(np.sum(target ** 2) / np.sum((c - target) ** 2)))


def frame_snr(r, c, frame=1920):
    r, c = r.astype(np.float64), c.astype(np.float64)
    glob = np.mean(r ** 2)
    out = []
    for s in range(0, len(r), frame):
        e = np.mean((c[s:s + frame] - r[s:s + frame]) ** 2)
        out.append(float(10 * np.log10(glob / e)) if e > 0 else float("inf"))
    return out


def metrics(r, c):
    n = min(len(r), len(c))
    r, c = r[:n], c[:n]
    diff = np.nonzero(r != c)[0]
    return {
        "max_abs_diff": float(np.max(np.abs(c.astype(np.float64) - r.astype(np.float64)))),
        "snr_db": snr(r, c),
        "si_sdr_db": si_sdr(r, c),
        "mel_distance_db": mel_distance(r, c),
        "first_diff_sample": int(diff[0]) if len(diff) else -1,
    }


def cases():
    inp = read_wav16("testdata/tiny/input.wav")
    out = read_wav16("testdata/tiny/expected/run_pt/output.wav")
    shifted = np.concatenate([np.zeros(240, np.float32), inp[:-240]])  # 10 ms late
    mixed = (out + np.float32(0.01) * inp).astype(np.float32)  # float32 arithmetic
    res = {
        "input_vs_output": metrics(inp, out),
        "input_vs_shift240": metrics(inp, shifted),
        "output_vs_plus_1pct_input": metrics(out, mixed),
        "output_vs_half": metrics(out, (out * np.float32(0.5)).astype(np.float32)),
        "output_vs_input_first_60000": metrics(out, inp[:60000]),
    }
    res["input_vs_shift240"]["frame_snr_db"] = frame_snr(inp, shifted)
    mo = mel_power(out)
    res["output_mel_power"] = {
        "frames": int(mo.shape[0]),
        "floor": mel_floor(mo),
        "frame100_bands_0_1_10_40_79": [float(mo[100, b]) for b in (0, 1, 10, 40, 79)],
    }
    mi = mel_power(inp[:60000])
    res["input60000_mel_frames"] = int(mi.shape[0])
    return res


def noise_table():
    """Mel distance with Gaussian noise added at -60…-30 dB re the RMS (16-bit rounding),
    and for 10 ms / 5 ms shifts: the measurement behind DefaultMaxMelDistanceDB."""
    for path in ("testdata/tiny/input.wav", "testdata/tiny/expected/run_pt/output.wav"):
        x = read_wav16(path).astype(np.float64)
        rms = np.sqrt(np.mean(x ** 2))
        row = {}
        for db in (-60, -50, -40, -30):
            vals = []
            for seed in range(5):
                rng = np.random.default_rng(seed)
                c = x + rng.standard_normal(len(x)) * rms * 10 ** (db / 20)
                c = np.round(np.clip(c, -1, 32767 / 32768) * 32768) / 32768
                vals.append(mel_distance(x, c))
            row["%d dB noise" % db] = "%.3f..%.3f" % (min(vals), max(vals))
        for sh in (240, 120):
            row["%d-sample shift" % sh] = "%.3f" % mel_distance(x, np.concatenate([np.zeros(sh), x[:-sh]]))
        print(path, json.dumps(row))


if __name__ == "__main__":
    np.seterr(divide="ignore")  # c = 0.5·r has SI-SDR +Inf
    if "--noise" in sys.argv[1:]:
        noise_table()
    else:
        print(json.dumps(cases(), indent=1))
