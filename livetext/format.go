package livetext

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/sessionflow/sessionflow/wire"
)

// Live file names and records (docs/FORMAT.md "Live text").
const (
	// filePrefix starts the name of every live file: live.<turn>.<step>.<attempt>.
	filePrefix = "live."
	// formatVersion is the "live" field of a live file's header record.
	formatVersion = 1
	// endStored and endAbandoned are the end markers: the call's message
	// is stored, or the attempt ends without storing one.
	endStored    = "stored"
	endAbandoned = "abandoned"
)

// callKey names one attempt of one model call.
type callKey struct {
	turn, step int64
	attempt    int32
}

// fileName is the live file of k.
func (k callKey) fileName() string {
	return filePrefix + strconv.FormatInt(k.turn, 10) + "." + strconv.FormatInt(k.step, 10) + "." + strconv.FormatInt(int64(k.attempt), 10)
}

// less orders attempts: by turn, then step, then attempt.
func (k callKey) less(o callKey) bool {
	if k.turn != o.turn {
		return k.turn < o.turn
	}
	if k.step != o.step {
		return k.step < o.step
	}
	return k.attempt < o.attempt
}

// sameCall reports whether k and o are attempts of one model call.
func (k callKey) sameCall(o callKey) bool { return k.turn == o.turn && k.step == o.step }

// parseName reads a live file name; ok is false for any other name.
func parseName(name string) (callKey, bool) {
	rest, ok := strings.CutPrefix(name, filePrefix)
	if !ok {
		return callKey{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return callKey{}, false
	}
	var n [3]int64
	for i, p := range parts {
		if p == "" || len(p) > 16 || (p[0] == '0') {
			return callKey{}, false
		}
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < 1 {
			return callKey{}, false
		}
		n[i] = v
	}
	if n[2] > 1<<31-1 {
		return callKey{}, false
	}
	return callKey{turn: n[0], step: n[1], attempt: int32(n[2])}, true
}

// IsLiveFile reports whether name (a base name) is a live file's: the
// store's tools and checks leave such files alone and never report them as
// damage.
func IsLiveFile(name string) bool {
	_, ok := parseName(name)
	return ok
}

// header is the first record of a live file.
type header struct {
	Live      int   `json:"live"`
	Turn      int64 `json:"turn"`
	Step      int64 `json:"step"`
	Attempt   int32 `json:"attempt"`
	StartedMs int64 `json:"startedMs"`
}

// record is any record of a live file, as a follower decodes it.
type record struct {
	Live   int     `json:"live"`
	Kind   string  `json:"kind"`
	Offset *int64  `json:"offset"`
	Text   *string `json:"text"`
	End    string  `json:"end"`
}

// appendChunk appends the chunk record {"kind":..,"offset":..,"text":..}
// and its newline to b.
func appendChunk(b []byte, kind string, offset int64, text string) []byte {
	q, _ := json.Marshal(text) // a string always marshals
	b = append(b, `{"kind":"`...)
	b = append(b, kind...)
	b = append(b, `","offset":`...)
	b = strconv.AppendInt(b, offset, 10)
	b = append(b, `,"text":`...)
	b = append(b, q...)
	return append(b, "}\n"...)
}

// kindIndex is the offset counter of a chunk kind; ok is false for a kind
// a live file does not carry.
func kindIndex(kind string) (int, bool) {
	switch kind {
	case wire.LiveKindText:
		return 0, true
	case wire.LiveKindReasoning:
		return 1, true
	}
	return 0, false
}
