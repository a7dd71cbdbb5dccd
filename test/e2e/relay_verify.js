// Verifies every request a relay_receiver.py log recorded with the
// Standard Webhooks reference library (npm "standardwebhooks"), which
// shares no code with paynotify-relay or the receiver:
//     NODE_PATH=DIR/node_modules node relay_verify.js SECRET LOGFILE
// Prints "verified N of M" and exits 1 unless every request verifies.
'use strict';
const fs = require('fs');
const { Webhook } = require('standardwebhooks');

const [secret, logfile] = process.argv.slice(2);
const wh = new Webhook(secret);
const lines = fs.readFileSync(logfile, 'utf8').split('\n').filter((l) => l !== '');
let good = 0;
for (const line of lines) {
  const r = JSON.parse(line);
  try {
    // the library checks the timestamp against its own clock (5 min)
    const payload = wh.verify(r.body, {
      'webhook-id': r.id,
      'webhook-timestamp': r.timestamp,
      'webhook-signature': r.signature,
    });
    if (payload.id !== r.id) throw new Error('body id ' + payload.id + ' is not webhook-id ' + r.id);
    good++;
  } catch (e) {
    console.log('not verified: ' + r.id + ': ' + e.message);
  }
}
console.log('verified ' + good + ' of ' + lines.length);
process.exit(good === lines.length && lines.length > 0 ? 0 : 1);
