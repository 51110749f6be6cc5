package poppytest_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

func TestShopFixture(t *testing.T) {
	s, rt := newRecorded(t, nil)
	dana := s.Orders("acct_dana")
	if len(dana) != 2 || dana[0].ID != "ord_1042" || dana[0].Summary != "Stormline jacket, size M" ||
		dana[0].Status != poppytest.OrderDelivered || dana[1].ID != "ord_1043" || dana[1].Summary != "Trail socks" ||
		dana[1].Status != poppytest.OrderShipped {
		t.Errorf("dana's orders: %+v", dana)
	}
	if sam := s.Orders("acct_sam"); len(sam) != 1 || sam[0].ID != "ord_2001" || sam[0].Summary != "Rain hat" {
		t.Errorf("sam's orders: %+v", sam)
	}
	if _, ok := s.Order("acct_sam", "ord_1042"); ok {
		t.Errorf("sam can see dana's order")
	}
	o, ok := s.Order("acct_dana", "ord_1042")
	if !ok || len(o.Items) != 1 || o.Items[0].ID != "itm_4Qa" || o.Items[0].SKU != "stormline-m" {
		t.Errorf("Order(acct_dana, ord_1042) = %+v, %v", o, ok)
	}
	o.Items[0].SKU = "changed"
	if again, _ := s.Order("acct_dana", "ord_1042"); again.Items[0].SKU != "stormline-m" {
		t.Errorf("Order returned the live order, not a copy")
	}
	wantNoViolation(t, s, rt)
}

func TestShopReturnsAndExchanges(t *testing.T) {
	s, _ := newRecorded(t, nil)
	r, err := s.CreateReturn("acct_dana", "ord_1042", "not warm enough")
	if err != nil || r.OrderID != "ord_1042" || r.Status != "requested" || r.Reason != "not warm enough" || r.ID == "" {
		t.Fatalf("CreateReturn = %+v, %v", r, err)
	}
	for _, tc := range []struct {
		name    string
		err     error
		want    error
		account string
	}{
		{"again", second(s.CreateReturn("acct_dana", "ord_1042", "")), poppytest.ErrAlreadyReturned, ""},
		{"shipped", second(s.CreateReturn("acct_dana", "ord_1043", "")), poppytest.ErrNotDelivered, ""},
		{"another account's", second(s.CreateReturn("acct_sam", "ord_1042", "")), poppytest.ErrNoSuchOrder, ""},
		{"exchange unknown sku", second(s.CreateExchange("acct_dana", "ord_1042", "itm_4Qa", "nope")), poppytest.ErrUnknownSKU, ""},
		{"exchange same sku", second(s.CreateExchange("acct_dana", "ord_1042", "itm_4Qa", "stormline-m")), poppytest.ErrUnknownSKU, ""},
		{"exchange no item", second(s.CreateExchange("acct_dana", "ord_1042", "itm_x", "stormline-l")), poppytest.ErrNoSuchItem, ""},
		{"exchange shipped", second(s.CreateExchange("acct_dana", "ord_1043", "itm_7Kb", "trail-socks-l")), poppytest.ErrNotDelivered, ""},
		{"exchange no order", second(s.CreateExchange("acct_dana", "ord_9", "itm_4Qa", "stormline-l")), poppytest.ErrNoSuchOrder, ""},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	x, err := s.CreateExchange("acct_dana", "ord_1042", "itm_4Qa", "stormline-insulated-m")
	if err != nil || x.ReplacementSKU != "stormline-insulated-m" || x.PriceDifference != 70 || x.ItemID != "itm_4Qa" {
		t.Fatalf("CreateExchange = %+v, %v", x, err)
	}
	if _, err := s.CreateExchange("acct_dana", "ord_1042", "itm_4Qa", "stormline-l"); !errors.Is(err, poppytest.ErrAlreadyExchanged) {
		t.Errorf("second exchange: %v", err)
	}
	if len(s.Returns("acct_dana")) != 1 || len(s.Exchanges("acct_dana")) != 1 || len(s.Returns("acct_sam")) != 0 {
		t.Errorf("Returns %+v, Exchanges %+v", s.Returns("acct_dana"), s.Exchanges("acct_dana"))
	}
}

func TestShopConcurrentReturns(t *testing.T) {
	s, _ := newRecorded(t, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 8 {
		wg.Go(func() {
			if _, err := s.CreateReturn("acct_sam", "ord_2001", "wet"); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != 1 || len(s.Returns("acct_sam")) != 1 {
		t.Errorf("%d concurrent returns succeeded, want 1", ok)
	}
}

func second[T any](_ T, err error) error { return err }

// TestShopAddOrder: an order added for an account of a test's own is that
// account's alone, and one with a SKU not in the catalog is refused.
func TestShopAddOrder(t *testing.T) {
	s, rt := newRecorded(t, nil)
	o := poppytest.Order{ID: "ord_p007", Account: "acct_p007", Summary: "Parcel of p007", Status: poppytest.OrderShipped,
		Items: []poppytest.Item{{ID: "itm_p007", Name: "Rain hat, one size", SKU: "rain-hat-os", Quantity: 1, Price: 35}}}
	if err := s.AddOrder(o); err != nil {
		t.Fatal(err)
	}
	if got := s.Orders("acct_p007"); len(got) != 1 || got[0].ID != "ord_p007" || got[0].Summary != "Parcel of p007" {
		t.Errorf("acct_p007's orders: %+v", got)
	}
	if _, ok := s.Order("acct_dana", "ord_p007"); ok || len(s.Orders("acct_dana")) != 2 {
		t.Errorf("dana sees the added order, or lost hers: %+v", s.Orders("acct_dana"))
	}
	o.ID, o.Items[0].SKU = "ord_p008", "no-such-sku"
	if err := s.AddOrder(o); !errors.Is(err, poppytest.ErrUnknownSKU) {
		t.Errorf("AddOrder with an unknown SKU: %v", err)
	}
	wantNoViolation(t, s, rt)
}
