UPDATE notice_sweep SET swept_upto = $1 WHERE swept_upto < $1
