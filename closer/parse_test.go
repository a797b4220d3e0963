package closer

import "testing"

func TestParseOutcome(t *testing.T) {
	tests := []struct {
		name    string
		in      []any
		want    redisOutcome
		wantErr bool
	}{
		{"missing", []any{int64(0)}, redisOutcome{kind: stateMissing}, false},
		{"running", []any{int64(2), "1700000000000000"}, redisOutcome{kind: stateRunning, endUs: 1700000000000000}, false},
		{"closed with a leader", []any{int64(1), "125000", "42", "7", "1700000000000000"},
			redisOutcome{kind: stateClosed, price: 125000, leader: ptr(42), seq: 7, endUs: 1700000000000000}, false},
		{"closed without a bid", []any{int64(1), "10000", "", "0", "5"},
			redisOutcome{kind: stateClosed, price: 10000, seq: 0, endUs: 5}, false},
		{"empty", nil, redisOutcome{}, true},
		{"unknown kind", []any{int64(9)}, redisOutcome{}, true},
		{"short closed", []any{int64(1), "1"}, redisOutcome{}, true},
		{"bad leader", []any{int64(1), "1", "x", "1", "1"}, redisOutcome{}, true},
		{"bad price", []any{int64(1), "1.5", "", "1", "1"}, redisOutcome{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseOutcome(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parsed %v as %+v, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.kind != tc.want.kind || got.price != tc.want.price || !equalLeader(got.leader, tc.want.leader) ||
				got.seq != tc.want.seq || got.endUs != tc.want.endUs {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
