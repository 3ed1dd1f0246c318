package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	sdk "github.com/openai/openai-go/v3"

	"github.com/sessionflow/sessionflow/provider"
)

func TestWatchedBodyFindsDoneAcrossReads(t *testing.T) {
	cases := map[string]bool{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n": true,
		"data: [DONE]\n\n":                    true, // the body's first line
		"data:[DONE]\n\n":                     true,
		"data: {\"c\":\"data: [DONE]\"}\n\n":  false,
		"data: {\"a\":1}\n\n":                 false,
		": data: [DONE]\n\n":                  false, // a comment line
	}
	for body, want := range cases {
		// One byte per read: the marker always spans reads.
		b := &watchedBody{ReadCloser: io.NopCloser(iotest.OneByteReader(strings.NewReader(body))), tail: []byte{'\n'}}
		if _, err := io.ReadAll(b); err != nil {
			t.Fatal(err)
		}
		if b.done != want {
			t.Errorf("%q: done = %v, want %v", body, b.done, want)
		}
	}
}

// FuzzDecoderYieldsStreamsTheAssemblerAccepts drives the decoder with
// chunk sequences built from the fuzz input (text, reasoning, tool-call
// deltas at a few indices with or without ids and names, usage, finish
// reasons) and pushes what it yields into a provider.Assembler: the decoder
// either refuses a sequence or yields one the Assembler accepts.
func FuzzDecoderYieldsStreamsTheAssemblerAccepts(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{2, 0x12, 0x22, 3, 0x13, 7})
	f.Add([]byte{0x42, 0x52, 0x43, 0x53, 6, 5})
	f.Add([]byte{2, 2, 0x12, 0x32, 4})
	f.Add([]byte{0x02, 0x32, 0x02, 5})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var d decoder
		asm := provider.NewAssembler()
		push := func(cs []provider.Chunk) {
			for _, c := range cs {
				if err := asm.Push(c, 1); err != nil {
					t.Fatalf("ops %v: the Assembler refused %+v: %v", ops, c, err)
				}
			}
		}
		for _, op := range ops {
			var raw string
			index := int(op>>4) % 3
			switch op & 0x0f {
			case 0:
				raw = `{"content":"t"}`
			case 1:
				raw = `{"reasoning_content":"r"}`
			case 2: // a call's first delta
				raw = fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"call_%d","function":{"name":"f","arguments":"{"}}]}`, index, op>>4)
			case 3: // an arguments piece
				raw = fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":"}"}}]}`, index)
			case 4: // a first delta without an id
				raw = fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"name":"g"}}]}`, index)
			case 5:
				raw = `{}`
			default:
				raw = `{"content":""}`
			}
			finish := "null"
			if op&0x0f == 5 {
				finish = [...]string{`"stop"`, `"length"`, `"tool_calls"`}[index]
			}
			var c sdk.ChatCompletionChunk
			body := `{"id":"x","choices":[{"index":0,"delta":` + raw + `,"finish_reason":` + finish + `}]`
			if op&0x0f == 6 {
				body += `,"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}`
			}
			if err := json.Unmarshal([]byte(body+`}`), &c); err != nil {
				t.Fatal(err)
			}
			cs, perr := d.chunk(c)
			if perr != nil {
				return // refused: nothing more is yielded
			}
			push(cs)
		}
		cs, perr := d.end(true)
		if perr != nil {
			t.Fatalf("end: %v", perr)
		}
		push(cs)
		if asm.Finish() == "" {
			t.Fatal("no finish")
		}
	})
}
