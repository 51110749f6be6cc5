package openapi2tools

// This file implements the YAML → JSON reading of an OpenAPI document within
// a bound on what its aliases expand to (docs/architecture.md, "Reading an
// OpenAPI document"). An alias repeats its anchor's whole value: a 517 KB
// document with one 500 KB anchored string and 1,500 aliases to it is 750 MB
// of JSON. The YAML library bounds the count of aliases, not the bytes they
// expand to, so the document is parsed into its node tree (aliases still
// pointers), measured with aliases followed, refused past the bound, and only
// then written as JSON straight from the tree, with no generic Go value tree
// between them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"sort"

	"go.yaml.in/yaml/v4"
)

// The expansion bound: after following its aliases, a YAML document may hold
// at most expansionFactor times its size (plus a floor, for small documents)
// in scalar bytes (keys and values) and in nodes, and never more than
// maxExpandedBytes of scalar bytes or maxExpandedNodes nodes, nested no deeper
// than maxExpandedDepth. A document without aliases is always within it: its
// scalars are no longer than the document, and each node takes at least one
// byte of it.
const (
	expansionFactor  = 4
	expansionFloor   = 1 << 20
	maxExpandedBytes = MaxDocumentBytes // what the largest JSON document we read can carry
	maxExpandedNodes = 16 << 20
	maxExpandedDepth = 10000 // the YAML library's and encoding/json's nesting limit
)

// expansion is what a node amounts to once its aliases are followed.
type expansion struct {
	bytes, nodes int64
	depth        int
}

// expansionBudget measures a node tree against the bound. Anchored nodes are
// measured once: YAML defines an anchor before any alias to it, so a walk in
// document order meets every alias after its anchor's measure is known, and
// costs one visit per node of the tree as written.
type expansionBudget struct {
	size               int64 // the document's bytes
	maxBytes, maxNodes int64
	anchors            map[*yaml.Node]expansion
}

func newExpansionBudget(size int) *expansionBudget {
	n := int64(size)
	return &expansionBudget{
		size:     n,
		maxBytes: min(expansionFactor*n+expansionFloor, maxExpandedBytes),
		maxNodes: min(expansionFactor*n+expansionFloor, maxExpandedNodes),
		anchors:  map[*yaml.Node]expansion{},
	}
}

// measure returns n's expansion, or an error as soon as any part of it
// passes the bound.
func (b *expansionBudget) measure(n *yaml.Node) (expansion, error) {
	if n.Kind == yaml.AliasNode {
		// YAML 1.2.2 §3.2.2.2: "the first occurrence of the node must be marked
		// by an anchor to allow subsequent occurrences to be presented as alias
		// nodes", so the anchor's measure is known unless the alias is inside it.
		e, ok := b.anchors[n.Alias]
		if !ok { // the alias is inside its own anchor
			return e, invalidDocument("YAML alias expansion: alias *%s on line %d is inside its own anchor", n.Value, n.Line)
		}
		return e, b.check(e, n)
	}
	e := expansion{bytes: int64(len(n.Value)), nodes: 1}
	for _, c := range n.Content {
		ce, err := b.measure(c)
		if err != nil {
			return e, err
		}
		e.bytes, e.nodes, e.depth = e.bytes+ce.bytes, e.nodes+ce.nodes, max(e.depth, ce.depth)
		if err := b.check(e, c); err != nil {
			return e, err
		}
	}
	e.depth++
	if n.Anchor != "" {
		b.anchors[n] = e
	}
	return e, nil
}

// check refuses e past the bound, naming the alias (or the node holding
// one) that took it there.
func (b *expansionBudget) check(e expansion, at *yaml.Node) error {
	what := ""
	switch {
	case e.bytes > b.maxBytes:
		what = "past " + binarySize(b.maxBytes) + " of text"
	case e.nodes > b.maxNodes:
		what = fmt.Sprintf("past %d nodes", b.maxNodes)
	case e.depth > maxExpandedDepth:
		what = fmt.Sprintf("to nesting deeper than %d", maxExpandedDepth)
	default:
		return nil
	}
	where := fmt.Sprintf("line %d", at.Line)
	if at.Kind == yaml.AliasNode {
		where = fmt.Sprintf("alias *%s on line %d", at.Value, at.Line)
	}
	return invalidDocument("YAML alias expansion: the aliases of this %s document expand it %s (at %s); "+
		"a YAML document may expand to %d times its size plus 1 MiB, and to no more than %s of text or %d Mi nodes",
		binarySize(b.size), what, where, expansionFactor, binarySize(maxExpandedBytes), maxExpandedNodes>>20)
}

// binarySize is n bytes in KiB or MiB.
func binarySize(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", (n+1023)>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// yamlToJSON converts a YAML document to the JSON that json.Marshal makes of
// what yaml.Unmarshal decodes into an any (keys sorted, HTML characters
// escaped), refusing a document whose aliases expand past the bound. The YAML
// library bounds the nesting depth of the document as written.
func yamlToJSON(data []byte) (json.RawMessage, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, invalidDocument("document is neither JSON nor YAML: %v", err)
	}
	e, err := newExpansionBudget(len(data)).measure(&root)
	if err != nil {
		return nil, err
	}
	w := newJSONWriter(int(e.bytes + 4*e.nodes))
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		w.buf.WriteString("null") // an empty document
	} else if err := w.value(root.Content[0]); err != nil {
		return nil, err
	}
	if len(data) >= smallDocument {
		// The node tree, about 15 times the document's size, is garbage now,
		// but the heap may grow to twice it before the collector runs on its
		// own: collected now, the translation's peak stays under the
		// conversion's (BENCHMARKS.md, "YAML expansion bound").
		root = yaml.Node{}
		runtime.GC()
	}
	return w.buf.Bytes(), nil
}

// jsonWriter writes a node tree as JSON, following aliases. The tree must be
// within the expansion bound. Not safe for concurrent use.
type jsonWriter struct {
	buf bytes.Buffer
	enc *json.Encoder // on buf, escaping strings as json.Marshal does
}

func newJSONWriter(sizeHint int) *jsonWriter {
	w := &jsonWriter{}
	w.buf.Grow(sizeHint)
	w.enc = json.NewEncoder(&w.buf)
	return w
}

func (w *jsonWriter) value(n *yaml.Node) error {
	switch n.Kind {
	case yaml.AliasNode:
		return w.value(n.Alias)
	case yaml.ScalarNode:
		return w.scalar(n)
	case yaml.SequenceNode:
		return w.sequence(n)
	case yaml.MappingNode:
		return w.mapping(n)
	}
	return w.decoded(n)
}

func (w *jsonWriter) sequence(n *yaml.Node) error {
	w.buf.WriteByte('[')
	first := true
	for _, c := range n.Content {
		if isMergeValue(c) {
			continue
		}
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
		if err := w.value(c); err != nil {
			return err
		}
	}
	w.buf.WriteByte(']')
	return nil
}

// scalar writes the common scalars itself (strings, null, true and false,
// short decimal integers) and leaves the rest (floats, timestamps, binary,
// other spellings, explicit tags) to the YAML library's own decoding.
func (w *jsonWriter) scalar(n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!str":
		return w.str(n.Value)
	case "!!null":
		w.buf.WriteString("null")
		return nil
	case "!!bool":
		if n.Value == "true" || n.Value == "false" {
			w.buf.WriteString(n.Value)
			return nil
		}
	case "!!int":
		if plainDecimal(n.Value) {
			w.buf.WriteString(n.Value)
			return nil
		}
	}
	return w.decoded(n)
}

// isMergeValue reports a "<<" where a value belongs: the YAML library
// decodes it to nothing, and leaves the member or element out.
func isMergeValue(n *yaml.Node) bool {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!merge"
}

// plainDecimal reports whether s is an integer that decodes to an int and
// encodes back to s: no sign but "-", no leading zero, at most 18 digits.
func plainDecimal(s string) bool {
	d := s
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 || (d[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

func (w *jsonWriter) str(s string) error {
	if err := w.enc.Encode(s); err != nil {
		return invalidDocument("YAML document: %v", err)
	}
	w.buf.Truncate(w.buf.Len() - 1) // Encode's newline
	return nil
}

// decoded writes n as json.Marshal writes what the YAML library decodes it
// to. n is within the bound, so its decoded value is too.
func (w *jsonWriter) decoded(n *yaml.Node) error {
	var v any
	if err := n.Decode(&v); err != nil {
		return invalidDocument("document is neither JSON nor YAML: %v", err)
	}
	out, err := json.Marshal(jsonable(v))
	if err != nil {
		return invalidDocument("YAML document: %v", err)
	}
	w.buf.Write(out)
	return nil
}

// yamlMember is one key of a mapping, as JSON names it.
type yamlMember struct {
	key   string
	node  *yaml.Node // the key
	value *yaml.Node
}

// mapping writes a mapping's members sorted by key, as json.Marshal writes
// a map. A mapping with a merge key ("<<") or a key that is not a scalar is
// left to the YAML library, whose merge rules are its own.
func (w *jsonWriter) mapping(n *yaml.Node) error {
	members, err := mappingMembers(n)
	if err != nil {
		return err
	}
	if members == nil {
		return w.decoded(n)
	}
	w.buf.WriteByte('{')
	first := true
	for i, m := range members {
		if i > 0 && members[i-1].key == m.key {
			continue // an earlier spelling of the same key (0x10 and 16); the last one wins
		}
		v := lastOf(members, i).value
		if isMergeValue(v) {
			continue
		}
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
		if err := w.str(m.key); err != nil {
			return err
		}
		w.buf.WriteByte(':')
		if err := w.value(v); err != nil {
			return err
		}
	}
	w.buf.WriteByte('}')
	return nil
}

// lastOf is the last member from i on with members[i]'s key.
func lastOf(members []yamlMember, i int) yamlMember {
	for i+1 < len(members) && members[i+1].key == members[i].key {
		i++
	}
	return members[i]
}

// mappingMembers returns n's members sorted by key (stable), or nil when the
// mapping is one for the YAML library (a merge key, a key that is not a
// scalar). A key written twice is an error, as the library makes it.
func mappingMembers(n *yaml.Node) ([]yamlMember, error) {
	members := make([]yamlMember, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" || (k.Tag == "" && k.Value == "<<") {
			return nil, nil
		}
		key, err := keyString(k)
		if err != nil {
			return nil, err
		}
		members = append(members, yamlMember{key: key, node: k, value: n.Content[i+1]})
	}
	sort.SliceStable(members, func(i, j int) bool { return members[i].key < members[j].key })
	if a, b := duplicateKey(members); a != nil {
		return nil, invalidDocument("document is neither JSON nor YAML: line %d: mapping key %q already defined at line %d", b.Line, b.Value, a.Line)
	}
	return members, nil
}

// duplicateKey finds two keys written alike, the YAML library's test of a
// key defined twice.
func duplicateKey(members []yamlMember) (first, again *yaml.Node) {
	if len(members) <= 16 {
		for i := range members {
			for j := i + 1; j < len(members); j++ {
				if members[i].node.Value == members[j].node.Value {
					return members[i].node, members[j].node
				}
			}
		}
		return nil, nil
	}
	seen := make(map[string]*yaml.Node, len(members))
	for _, m := range members {
		if k, dup := seen[m.node.Value]; dup {
			return k, m.node
		}
		seen[m.node.Value] = m.node
	}
	return nil, nil
}

// keyString is a scalar key as jsonable names it: a string as it is, any
// other value as fmt.Sprint prints what the library decodes it to.
func keyString(k *yaml.Node) (string, error) {
	if k.ShortTag() == "!!str" {
		return k.Value, nil
	}
	var v any
	if err := k.Decode(&v); err != nil {
		return "", invalidDocument("document is neither JSON nor YAML: %v", err)
	}
	return fmt.Sprint(v), nil
}

// jsonable turns what YAML decodes (maps with non-string keys, non-finite
// floats) into values encoding/json accepts.
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonable(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonable(e)
		}
		return t
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return fmt.Sprint(t)
		}
	}
	return v
}
