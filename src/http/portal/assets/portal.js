// The webhook portal's only script: it helps, nothing depends on it.

document.addEventListener('DOMContentLoaded', () => {
  // Times are UTC in the markup (and on hover); shown in the browser's own time zone.
  for (const el of document.querySelectorAll('time[datetime]')) {
    const at = new Date(el.getAttribute('datetime'));
    if (!Number.isNaN(at.getTime())) el.textContent = at.toLocaleString();
  }
  // Forms that cannot be undone ask first.
  for (const form of document.querySelectorAll('form[data-confirm]')) {
    form.addEventListener('submit', (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  // The test form shows the sample of the chosen type.
  for (const select of document.querySelectorAll('select[data-samples]')) {
    const show = () => {
      for (const sample of select.form.querySelectorAll('[data-sample]')) {
        sample.hidden = sample.dataset.sample !== select.value;
      }
    };
    select.addEventListener('change', show);
    show();
  }
  // A datetime-local input is read in the browser's zone (at that date): the server is told which.
  for (const input of document.querySelectorAll('input[data-tz-offset]')) {
    input.form.addEventListener('submit', () => {
      const local = input.form.querySelector('input[type="datetime-local"]');
      const at = local?.value ? new Date(local.value) : new Date();
      input.value = String(at.getTimezoneOffset());
    });
  }
  for (const input of document.querySelectorAll('input[data-select]')) {
    input.addEventListener('focus', () => input.select());
  }
});
