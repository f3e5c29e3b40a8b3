"""The bundled demo model and task, installed with reachtui as the package `reachtui.bundled`."""
