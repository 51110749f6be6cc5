// This file implements a parser of server-sent events, as the HTML Living
// Standard §9.2.6 "Interpreting an event stream" defines it: a leading BOM
// dropped, lines ended by CRLF, LF or CR, comments, fields with one
// optional space after the colon, multi-line data, id without NULL, retry
// of ASCII digits, and an incomplete event at the end discarded. Poppy 0.1
// §7.6 streams events this way. Lines and events are limited in size, for
// the stream comes from the Company.

package conversation

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	// Type is the event type; "message" when the event named none.
	Type string
	// Data is the data, lines joined with LF.
	Data string
	// ID is the last event ID as of this event: it carries over from
	// earlier events, as in the standard.
	ID string
	// HasID says whether this event's own lines set the ID.
	HasID bool
}

// errSSETooLarge is returned when a line or an event exceeds its limit.
var errSSETooLarge = errors.New("conversation: server-sent event too large")

// maxRetry caps the reconnection time a stream may set.
const maxRetry = time.Minute

// sseReader reads server-sent events from a stream. It is not safe for
// concurrent use.
type sseReader struct {
	r        *bufio.Reader
	maxLine  int
	maxEvent int

	started bool // the first line was read (its BOM dropped)
	skipLF  bool // the last line ended with CR: a LF next is that line's end

	line      []byte
	data      strings.Builder
	eventType string
	lastID    string
	hasID     bool

	// retry is the reconnection time the stream set; zero when it set none.
	retry time.Duration
}

// sseBuffer is the size of a stream's read buffer. A stream spends its
// life waiting, and a hosted poppy-mcp holds one per waiting call
// (BENCHMARKS.md "Hosted: people waiting"): a line longer than it is read
// in pieces (readLine), so a small buffer costs a few more reads of a
// long event, never a refusal.
const sseBuffer = 512

// newSSEReader reads events from r, with lines and events of at most
// maxLine and maxEvent bytes.
func newSSEReader(r io.Reader, maxLine, maxEvent int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, sseBuffer), maxLine: maxLine, maxEvent: maxEvent}
}

// Next returns the next event. At the end of the stream it returns io.EOF,
// discarding an incomplete event: "If the file ends in the middle of an
// event, before the final empty line, the incomplete event is not
// dispatched." Other errors are the reader's, or errSSETooLarge.
func (p *sseReader) Next() (sseEvent, error) {
	for {
		line, err := p.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			// "If the line is empty (a blank line): Dispatch the event"
			if ev, ok := p.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if err := p.processLine(line); err != nil {
			return sseEvent{}, err
		}
	}
}

// processLine handles one non-empty line.
func (p *sseReader) processLine(line []byte) error {
	// "If the line starts with a U+003A COLON character (:) Ignore the line."
	if line[0] == ':' {
		return nil
	}
	name, value, found := bytes.Cut(line, []byte{':'})
	// "If there is a U+0020 SPACE character immediately after the colon,
	// ... remove it from value." Without a colon, the value is empty.
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	v := strings.ToValidUTF8(string(value), "\uFFFD")
	switch string(name) {
	case "event":
		p.eventType = v
	case "data":
		// "Append the field value to the data buffer, then append a single
		// U+000A LINE FEED (LF) character to the data buffer."
		if p.data.Len()+len(v)+1 > p.maxEvent {
			return errSSETooLarge
		}
		p.data.WriteString(v)
		p.data.WriteByte('\n')
	case "id":
		// "If the field value does not contain U+0000 NULL, then set the
		// last event ID buffer to the field value. Otherwise, ignore the field."
		if !strings.ContainsRune(v, 0) {
			p.lastID, p.hasID = v, true
		}
	case "retry":
		// "If the field value consists of only ASCII digits, then interpret
		// the field value as an integer in base ten, and set the event
		// stream's reconnection time to that integer."
		if ms, ok := asciiDigits(v); ok {
			p.retry = time.Duration(min(ms, int64(maxRetry/time.Millisecond))) * time.Millisecond
		}
	}
	// "Otherwise: The field is ignored."
	return nil
}

// dispatch ends the event being built. It reports false when there is
// nothing to dispatch: "If the data buffer is an empty string, set the data
// buffer and the event type buffer to the empty string and return."
func (p *sseReader) dispatch() (sseEvent, bool) {
	hasID := p.hasID
	p.hasID = false
	data, typ := p.data.String(), p.eventType
	p.data.Reset()
	p.eventType = ""
	if data == "" {
		return sseEvent{}, false
	}
	// "If the data buffer's last character is a U+000A LINE FEED (LF)
	// character, then remove the last character from the data buffer."
	data = strings.TrimSuffix(data, "\n")
	if typ == "" {
		typ = "message"
	}
	return sseEvent{Type: typ, Data: data, ID: p.lastID, HasID: hasID}, true
}

// readLine returns the next line without its end. A CR ends a line at
// once, so an event is never held back waiting to see whether a LF
// follows; a LF right after it is skipped when the next line is read.
func (p *sseReader) readLine() ([]byte, error) {
	p.line = p.line[:0]
	for {
		buf, err := p.buffered()
		if err != nil {
			// A line cut by the end of the stream is pending data: discarded.
			return nil, err
		}
		if p.skipLF {
			p.skipLF = false
			if buf[0] == '\n' {
				p.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		n := i
		if i < 0 {
			n = len(buf)
		}
		if len(p.line)+n > p.maxLine {
			return nil, errSSETooLarge
		}
		p.line = append(p.line, buf[:n]...)
		if i < 0 {
			p.r.Discard(n)
			continue
		}
		p.skipLF = buf[i] == '\r'
		p.r.Discard(i + 1)
		return p.firstLine(p.line), nil
	}
}

// buffered returns the bytes buffered, reading more when there are none.
func (p *sseReader) buffered() ([]byte, error) {
	if p.r.Buffered() == 0 {
		if _, err := p.r.Peek(1); err != nil {
			return nil, err
		}
	}
	return p.r.Peek(p.r.Buffered())
}

// firstLine drops the BOM from the stream's first line. HTML Living
// Standard §9.2.5: "One leading U+FEFF BYTE ORDER MARK character must be
// ignored if any are present."
func (p *sseReader) firstLine(line []byte) []byte {
	if p.started {
		return line
	}
	p.started = true
	return bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
}

// asciiDigits parses a non-empty string of ASCII digits, saturating at a
// large value rather than overflowing.
func asciiDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return int64(maxRetry / time.Millisecond), true
	}
	return n, true
}

// String describes the event for test failures.
func (e sseEvent) String() string {
	return fmt.Sprintf("{type %q id %q (own %v) data %q}", e.Type, e.ID, e.HasID, e.Data)
}
