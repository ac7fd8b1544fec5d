#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A solver for the tests that introduces itself as cvc5 and then never
# answers: the analyzer must give up at its deadline and fail closed.
printf '(:name "cvc5")\n(:version "1.0.3")\n'
exec sleep 600
