package redisstore

import (
	"testing"

	"bidgate"
)

func TestParseClose(t *testing.T) {
	tests := []struct {
		name    string
		in      []any
		want    CloseOutcome
		wantErr bool
	}{
		{"missing", []any{int64(0)}, CloseOutcome{Ending: NoState}, false},
		{"running", []any{int64(2), "1700000000000000"}, CloseOutcome{Ending: Running, EndUs: 1700000000000000}, false},
		{"closed with a leader", []any{int64(1), "125000", "42", "7", "1700000000000000"},
			CloseOutcome{Ending: Closed, PriceCents: 125000, LeaderID: 42, Seq: 7, EndUs: 1700000000000000}, false},
		{"closed without a bid", []any{int64(1), "10000", "", "0", "5"},
			CloseOutcome{Ending: Closed, PriceCents: 10000, EndUs: 5}, false},
		{"empty", nil, CloseOutcome{}, true},
		{"unknown kind", []any{int64(9)}, CloseOutcome{}, true},
		{"short closed", []any{int64(1), "1"}, CloseOutcome{}, true},
		{"bad leader", []any{int64(1), "1", "x", "1", "1"}, CloseOutcome{}, true},
		{"bad price", []any{int64(1), "1.5", "", "1", "1"}, CloseOutcome{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseClose(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parsed %v as %+v, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseUpdate(t *testing.T) {
	good := Update{AuctionID: 7, PriceCents: 12345, LeaderID: 42, EndUs: 1700000000000001, Status: "OPEN", Seq: 3, UpdatedUs: 1700000000000000}
	noLeader := Update{AuctionID: 7, PriceCents: 100, EndUs: 5, Status: "CLOSED"}
	promoted := good
	promoted.Mode = bidgate.ModeHot
	aliased := good
	aliased.LeaderAlias = 3
	promotedAliased := promoted
	promotedAliased.LeaderAlias = 3
	tests := []struct {
		name string
		in   string
		want Update
		ok   bool
	}{
		{"round trip", good.encode(), good, true},
		{"no leader", noLeader.encode(), noLeader, true},
		{"as bid_batch.lua writes it", "u1|7|12345|42|1700000000000001|OPEN|3|1700000000000000", good, true},
		{"json", `{"auctionId":7}`, Update{}, false},
		{"other version", "u2|7|12345|42|1|OPEN|3|1", Update{}, false},
		{"short", "u1|7|12345", Update{}, false},
		{"bad price", "u1|7|12.5|42|1|OPEN|3|1", Update{}, false},
		{"negative seq", "u1|7|1|42|1|OPEN|-3|1", Update{}, false},
		{"bad leader", "u1|7|1|x|1|OPEN|3|1", Update{}, false},
		{"bad status", "u1|7|1|42|1|GONE|3|1", Update{}, false},
		{"no auction", "u1|0|1|42|1|OPEN|3|1", Update{}, false},
		{"promotion", promoted.encode(), promoted, true},
		{"as a promotion writes it", "u1|7|12345|42|1700000000000001|OPEN|3|1700000000000000|HOT", promoted, true},
		{"bad mode", "u1|7|1|42|1|OPEN|3|1|WARM", Update{}, false},
		{"too long", "u1|7|1|42|1|OPEN|3|1|HOT|3|x", Update{}, false},
		{"with the alias", aliased.encode(), aliased, true},
		{"as bid_batch.lua writes it, with the alias", "u1|7|12345|42|1700000000000001|OPEN|3|1700000000000000||3", aliased, true},
		{"a promotion with the alias", promotedAliased.encode(), promotedAliased, true},
		{"an unknown alias", "u1|7|12345|42|1700000000000001|OPEN|3|1700000000000000||", good, true},
		{"bad alias", "u1|7|1|42|1|OPEN|3|1||x", Update{}, false},
		{"empty mode without an alias", "u1|7|1|42|1|OPEN|3|1|", Update{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseUpdate(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("ParseUpdate(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}
