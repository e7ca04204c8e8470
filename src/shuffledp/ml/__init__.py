"""Private machine learning on top of :mod:`shuffledp.central` and :mod:`shuffledp.accounting`.

- :mod:`shuffledp.ml.erm`: differentially private empirical risk minimisation (objective and
  output perturbation, Chaudhuri, Monteleoni, Sarwate, JMLR 2011) as scikit-learn estimators.
- :mod:`shuffledp.ml.accounting`: the project's RDP and PLD accountants as Opacus accountants,
  and DP-SGD noise calibration.
- :mod:`shuffledp.ml.pate`: PATE (Papernot et al. 2017, 2018) with LNMax / GNMax /
  Confident-GNMax aggregation and data-independent / data-dependent RDP analysis;
  :mod:`shuffledp.ml.pate_smooth_sensitivity`: publishing the data-dependent cost privately
  (smooth sensitivity, Papernot et al. 2018).
- :mod:`shuffledp.ml.dp_gan` and :mod:`shuffledp.ml.pate_gan`: synthetic tabular data from a GAN
  whose discriminator is trained with DP-SGD (DP-GAN), or whose student discriminator learns from
  noisy teacher votes (PATE-GAN, Jordon et al. 2019).
- :mod:`shuffledp.ml.membership_inference` and :mod:`shuffledp.ml.audit`: membership-inference
  attacks and empirical lower bounds on epsilon.

scikit-learn is needed by every module here; PyTorch and Opacus by
:mod:`shuffledp.ml.accounting`'s Opacus classes and :mod:`shuffledp.ml.dp_gan`, PyTorch by
:mod:`shuffledp.ml.pate_gan` (extra ``shuffledp[ml]``). Nothing below this layer imports it.
"""
