package workflows

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
)

// MaxRejectionMessageBytes bounds the message of an update's rejection.
//
// The SDK sends a rejection with the whole request beside the failure, and
// the server terminates a workflow whose rejection exceeds its blob size
// limit (docs/API.md: Update input limit). The server refuses a request
// near that limit before the workflow sees it, but a refusal that quoted
// the request (an unknown field name, an event type, an id) could double
// it; so every validator's failure is cut to this many bytes.
const MaxRejectionMessageBytes = 4 << 10

// boundRejection returns err with its message cut to
// MaxRejectionMessageBytes (at a UTF-8 boundary, followed by how much was
// cut); an application error keeps its type and non-retryability, and loses
// its details only when cut.
func boundRejection(err error) error {
	if err == nil || len(err.Error()) <= MaxRejectionMessageBytes {
		return err
	}
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		return errors.New(cutMessage(err.Error()))
	}
	msg := ae.Message()
	if len(msg) <= MaxRejectionMessageBytes {
		// The message is short; the length is in the cause chain.
		return temporal.NewNonRetryableApplicationError(msg, ae.Type(), nil)
	}
	return temporal.NewNonRetryableApplicationError(cutMessage(msg), ae.Type(), nil)
}

// cutMessage cuts msg to MaxRejectionMessageBytes.
func cutMessage(msg string) string {
	note := fmt.Sprintf("… (%d bytes of the message cut)", len(msg))
	n := MaxRejectionMessageBytes - len(note)
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n] + note
}
