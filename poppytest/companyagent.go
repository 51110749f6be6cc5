package poppytest

// This file is the scripted Company Agent of a store (Poppy 0.1 §7): it
// answers each message of the Personal Agent after Options.AgentDelay,
// with the status working meanwhile, by the first rule of companyAgentRules
// whose words the message's text holds. Rules that read or change the
// account check the token's scopes first (§7.11) and, when they fall short,
// add an authorization event and ask in a message; the task waits until the
// agent continues the conversation with a token that has them. It never
// treats a message as authorization: "Sending a message does not authorize
// the requested account action."

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// companyAgent is the conversations' concern of the scripted Company Agent.
// It holds no state of its own: its turns run under the conversations' lock
// on their convRecords.
type companyAgent struct {
	*Server
}

// defaultAgentDelay is Options.AgentDelay's zero value.
const defaultAgentDelay = 50 * time.Millisecond

// AgentRule is one rule of the scripted Company Agent. A message triggers
// the first rule, in AgentRules order, of which its text holds one of the
// Words as whole words, ignoring case. A message that triggers none gets a
// general answer, or resumes a task that was waiting for sign-in.
type AgentRule struct {
	Name  string   // "user_requested", "handoff", "exchange", "return" or "order_status"
	Words []string // words or phrases, any of which triggers the rule
	Scope string   // the scope the token needs (§7.11); "" for none
	Does  string   // what the Company Agent does
}

// companyAgentRules is the Company Agent's script, in the order it is tried.
var companyAgentRules = []AgentRule{
	{Name: "user_requested", Words: []string{"specialist", "talk to the user", "talk with the user"},
		Does: "adds a user_requested event with a reason and asks for the User in a message (§7.10); in a Direct Conversation it only answers"},
	{Name: "handoff", Words: []string{"person", "human", "representative"},
		Does: "hands off to a person on its own: says so, then status queued with responder agent (§7.9)"},
	{Name: "exchange", Words: []string{"exchange", "swap"}, Scope: "poppy:write",
		Does: "exchanges an item of a delivered order through CreateExchange; the order is data.order_id or a number in the text (1042 or ord_1042), the item data.item_id or the order's first, the SKU data.replacement_sku or a catalog SKU in the text"},
	{Name: "return", Words: []string{"return", "returns", "refund"}, Scope: "poppy:write",
		Does: "starts a return of a delivered order through CreateReturn, with the text as the reason; the order as for exchange"},
	{Name: "order_status", Words: []string{"order", "orders", "status", "track", "tracking", "delivery", "shipped", "delivered"}, Scope: "poppy:read",
		Does: "tells the status of the order named, or lists every order of the account, with the orders in data"},
}

// AgentRules returns the Company Agent's rules, in the order they are
// tried, so tests and demos know the words that trigger each.
func AgentRules() []AgentRule {
	out := slices.Clone(companyAgentRules)
	for i := range out {
		out[i].Words = slices.Clone(out[i].Words)
	}
	return out
}

// agentTask is one message for the Company Agent to answer.
type agentTask struct {
	caller *Caller // who sent it; the Company Agent checks this token's scopes
	text   string
	data   json.RawMessage
	rule   string // the rule to run; "" to match the text
}

// startTurn has the Company Agent answer task after Options.AgentDelay,
// with the status working meanwhile. The caller holds st.mu.
func (s *companyAgent) startTurn(cv *convRecord, task agentTask) {
	cv.turns++
	s.setState(cv, StatusWorking, cv.Responder)
	s.afterDelay(cv, func() { s.runTask(cv, task) })
}

// afterDelay runs f under st.mu after Options.AgentDelay, unless the
// conversation's turns were cancelled or the Server closed meanwhile. The
// caller holds st.mu.
func (s *companyAgent) afterDelay(cv *convRecord, f func()) {
	delay := s.opts.AgentDelay
	if delay == 0 {
		delay = defaultAgentDelay
	}
	s.afterFunc(cv, max(delay, 0), f)
}

// afterFunc runs f under st.mu after delay, unless the conversation's
// turns were cancelled or the Server closed meanwhile. The caller holds
// st.mu.
func (s *companyAgent) afterFunc(cv *convRecord, delay time.Duration, f func()) {
	st, gen := s.convState, cv.gen
	time.AfterFunc(delay, func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		if !st.stopped && cv.gen == gen {
			f()
		}
	})
}

// runTask is one turn of the Company Agent. The caller holds st.mu.
func (s *companyAgent) runTask(cv *convRecord, task agentTask) {
	cv.turns--
	rule := task.rule
	if rule == "" {
		rule = matchRule(task.text)
	}
	if rule == "" && cv.pending != nil {
		task.rule, task.text, task.data = cv.pending.rule, cv.pending.text, cv.pending.data
		rule = task.rule
	}
	switch rule {
	case "user_requested":
		s.requestUser(cv)
	case "handoff":
		s.say(cv, "Let me bring in a person from our team.", nil)
		s.handOff(cv)
	case "exchange", "return", "order_status":
		task.rule = rule
		if s.mayUseAccount(cv, task) {
			s.accountTask(cv, task)
		}
	default:
		s.say(cv, "I'm the Example Company assistant. I can check an order's status, start a return or an exchange, or bring in a person.", nil)
	}
	if cv.turns == 0 && cv.Status == StatusWorking {
		s.setState(cv, StatusIdle, cv.Responder)
	}
}

// matchRule names the first rule whose words text holds, or "".
func matchRule(text string) string {
	words := " " + strings.Join(strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}), " ") + " "
	for _, r := range companyAgentRules {
		for _, w := range r.Words {
			if strings.Contains(words, " "+w+" ") {
				return r.Name
			}
		}
	}
	return ""
}

// say adds a message of the Company Agent. The caller holds st.mu.
func (s *companyAgent) say(cv *convRecord, text string, data any) {
	s.addCompanyMessage(cv, ResponderAgent, text, data)
}

// addCompanyMessage adds a Company message from sender. The caller holds st.mu.
func (s *companyAgent) addCompanyMessage(cv *convRecord, sender, text string, data any) {
	m := &Message{ID: "msg_" + randomString(9), Role: "company", Sender: sender, Text: text, Time: s.timeNow()}
	if data != nil {
		m.Data, _ = json.Marshal(data)
	}
	// Poppy 0.1 §7.7: "Each Company message MUST also include sender, with agent or human"
	s.addEvent(cv, Event{Type: "message", Message: m})
}

// requestUser asks for the User (Poppy 0.1 §7.10 "When the Company asks").
func (s *companyAgent) requestUser(cv *convRecord) {
	if cv.ParentID != "" {
		s.say(cv, "Thanks for joining. A specialist is looking at this with you now.", nil)
		return
	}
	s.addEvent(cv, Event{Type: "user_requested", Reason: "A specialist needs to confirm the details with the customer."})
	s.say(cv, "A specialist would like to talk with the customer directly. Please open a Direct Conversation.", nil)
}

// handOff queues the conversation for a person (Poppy 0.1 §7.9). With
// Options.NoHumans no one comes: after the delay, the status goes back to
// idle and the Company Agent says why. The caller holds st.mu.
func (s *companyAgent) handOff(cv *convRecord) {
	// Poppy 0.1 §7.7: "While the conversation is queued, responder stays agent."
	s.setState(cv, StatusQueued, ResponderAgent)
	if !s.opts.NoHumans {
		return // a Person joins when the test says so (or Options.OnEvent's watcher does)
	}
	s.afterDelay(cv, func() {
		if cv.Status != StatusQueued {
			return
		}
		// Poppy 0.1 §7.9: "If no one is available, the status goes back to idle with responder still agent, and the Company Agent says why in a message."
		s.say(cv, "No one from our team is available right now, so I'll keep helping you myself.", nil)
		s.setState(cv, StatusIdle, ResponderAgent)
	})
}

// agentPending is an account task waiting for the token to allow it.
type agentPending struct {
	rule, text string
	data       json.RawMessage
}

// mayUseAccount checks the token of the task for the rule's scope (Poppy
// 0.1 §7.11: "Before reading account information or making a change, the
// Company Agent checks for the required scopes"). When it falls short, it
// adds an authorization event, asks in a message, and keeps the task for
// when the agent continues with a token that has the scope. The caller
// holds st.mu.
func (s *companyAgent) mayUseAccount(cv *convRecord, task agentTask) bool {
	scope := ruleScope(task.rule)
	c := task.caller
	code := ""
	switch {
	case !c.SignedIn:
		code = "sign_in_required"
	case !c.HasScopes(scope):
		code = "insufficient_scope"
	}
	if code == "" {
		cv.pending = nil
		s.useAccount(cv, c.Account)
		return true
	}
	cv.pending = &agentPending{rule: task.rule, text: task.text, data: task.data}
	// Poppy 0.1 §7.11: "the Company adds an authorization event. It SHOULD also ask in a message"
	s.addEvent(cv, Event{Type: "authorization", Error: code, Scope: scope})
	s.say(cv, fmt.Sprintf("To do that I need access to your Example Company account: please sign in and allow %s.", scope),
		map[string]any{"error": code, "scope": scope})
	return false
}

// resumePending restarts a task that waited for sign-in when c's token now
// allows it. The caller holds st.mu.
func (s *companyAgent) resumePending(cv *convRecord, c *Caller) {
	p := cv.pending
	if p == nil || cv.turns > 0 || cv.Status != StatusIdle || cv.Responder != ResponderAgent ||
		!c.SignedIn || !c.HasScopes(ruleScope(p.rule)) {
		return
	}
	cv.pending = nil
	s.startTurn(cv, agentTask{caller: c, text: p.text, data: p.data, rule: p.rule})
}

// useAccount makes the conversation, its parent and its Direct
// Conversation belong to account (Poppy 0.1 §7.2: "Once it uses the User's
// account, it belongs to that account instead."). The caller holds st.mu.
func (s *companyAgent) useAccount(cv *convRecord, account string) {
	for _, id := range []string{cv.ID, cv.ParentID, cv.DirectID} {
		if other := s.convState.convs[id]; other != nil && other.Account == "" {
			other.Account = account
		}
	}
}

func ruleScope(name string) string {
	for _, r := range companyAgentRules {
		if r.Name == name {
			return r.Scope
		}
	}
	return ""
}

// accountTask runs a rule that reads or changes the account. The caller
// holds st.mu.
func (s *companyAgent) accountTask(cv *convRecord, task agentTask) {
	account := task.caller.Account
	var in struct {
		OrderID        string `json:"order_id"`
		ItemID         string `json:"item_id"`
		ReplacementSKU string `json:"replacement_sku"`
	}
	_ = json.Unmarshal(task.data, &in) // data of any other shape names nothing
	orderID := orderIn(in.OrderID, task.text)
	if orderID == "" && task.rule != "order_status" {
		s.say(cv, "Which order is it? Send its number, such as 1042.", nil)
		return
	}
	switch task.rule {
	case "order_status":
		s.orderStatus(cv, account, orderID)
	case "return":
		r, err := s.CreateReturn(account, orderID, task.text)
		if err != nil {
			s.say(cv, "I couldn't start that return: "+shopReason(err), nil)
			return
		}
		s.say(cv, fmt.Sprintf("I've started return %s for order %s. You'll get a shipping label by email.", r.ID, strings.TrimPrefix(orderID, "ord_")),
			map[string]any{"return_id": r.ID, "order_id": orderID, "status": r.Status})
	case "exchange":
		s.exchange(cv, account, orderID, in.ItemID, skuIn(in.ReplacementSKU, task.text))
	}
}

// orderStatus tells the status of one order, or of every order.
func (s *companyAgent) orderStatus(cv *convRecord, account, orderID string) {
	orders := s.Orders(account)
	if orderID != "" {
		orders = slices.DeleteFunc(orders, func(o Order) bool { return o.ID != orderID })
		if len(orders) == 0 {
			s.say(cv, fmt.Sprintf("I can't find order %s on your account.", orderID), nil)
			return
		}
	}
	var lines []string
	var list []map[string]any
	for _, o := range orders {
		lines = append(lines, fmt.Sprintf("order %s (%s) is %s", strings.TrimPrefix(o.ID, "ord_"), o.Summary, o.Status))
		list = append(list, map[string]any{"order_id": o.ID, "summary": o.Summary, "status": o.Status,
			"placed": o.Placed.UTC().Format(time.RFC3339)})
	}
	if len(lines) == 0 {
		s.say(cv, "Your account has no orders.", map[string]any{"orders": []any{}})
		return
	}
	s.say(cv, "Your "+strings.Join(lines, "; ")+".", map[string]any{"orders": list})
}

// exchange exchanges an item of an order for sku.
func (s *companyAgent) exchange(cv *convRecord, account, orderID, itemID, sku string) {
	o, ok := s.Order(account, orderID)
	if ok && itemID == "" && len(o.Items) > 0 {
		itemID = o.Items[0].ID
	}
	if sku == "" {
		s.say(cv, "Which item would you like instead? Send its SKU, such as stormline-insulated-m.", nil)
		return
	}
	x, err := s.CreateExchange(account, orderID, itemID, sku)
	if err != nil {
		s.say(cv, "I couldn't make that exchange: "+shopReason(err), nil)
		return
	}
	s.say(cv, fmt.Sprintf("I've set up exchange %s: the item of order %s for %s, a difference of $%d.", x.ID, strings.TrimPrefix(orderID, "ord_"), sku, x.PriceDifference),
		map[string]any{"exchange_id": x.ID, "order_id": orderID, "item_id": itemID, "replacement_sku": sku,
			"price_difference": x.PriceDifference, "status": x.Status})
}

// shopReason is a shop error as the Company Agent says it.
func shopReason(err error) string {
	return strings.TrimPrefix(err.Error(), "poppytest: ") + "."
}

// orderNumber finds an order ID in text: ord_1042, #1042 or 1042.
var orderNumber = regexp.MustCompile(`\b(?:ord_(\w+)|#?(\d{4}))\b`)

// orderIn is the order a task names: in data, else in the text.
func orderIn(fromData, text string) string {
	if fromData != "" {
		return fromData
	}
	m := orderNumber.FindStringSubmatch(text)
	switch {
	case m == nil:
		return ""
	case m[1] != "":
		return "ord_" + m[1]
	}
	return "ord_" + m[2]
}

// skuIn is the SKU a task names: in data, else a catalog SKU in the text.
func skuIn(fromData, text string) string {
	if fromData != "" {
		return fromData
	}
	text = strings.ToLower(text)
	best := ""
	for _, p := range catalog {
		if strings.Contains(text, p.SKU) && len(p.SKU) > len(best) {
			best = p.SKU // the longest, should one SKU hold another
		}
	}
	return best
}
