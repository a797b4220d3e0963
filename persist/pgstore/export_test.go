package pgstore

// StoredNoticesSQL lets the tests read the look-up's plan.
var StoredNoticesSQL = storedNoticesSQL
