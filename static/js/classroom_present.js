// The Present button of a page that is not in a room: it keeps the form's
// run and step on what the page shows, so the room opens where the
// presenter stands. The button is a plain form post; the control token
// comes back in an HttpOnly cookie, out of this script's reach.
const query = document.getElementById('present-query');
const step = document.getElementById('present-step');
const button = document.getElementById('present');

document.addEventListener('flashstep:step', (ev) => {
  if (!query) return;
  query.value = ev.detail.query || '';
  step.value = String(ev.detail.step || '');
  button.disabled = !ev.detail.query;
});
