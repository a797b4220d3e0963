package bidgate

import (
	"fmt"
	"strconv"
)

// ParseID reads an auction or user id in its one canonical form: a
// positive decimal int64, digits only, with no sign and no leading zero, so
// that "01" and "+1" are never taken for 1.
func ParseID(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != s {
		if len(s) > 24 {
			s = s[:24] + "..."
		}
		return 0, fmt.Errorf("an id is a positive integer in decimal digits with no sign or leading zero, got %q", s)
	}
	return n, nil
}
